package engine

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Subscriber is one node's pub/sub connection: a goroutine applies the
// subscription changes in order, another reads the messages. Both end when
// the Set's Life closes.
type Subscriber struct {
	p         *Set
	ps        *redis.PubSub
	timeout   time.Duration
	confirmed func(channel string)
	message   func(channel string)

	mu      sync.Mutex // lock order: a leaf (docs/internals.md)
	pending []subChange
	kick    chan struct{} // capacity 1: pending has work
}

// subChange is a change to the subscriptions: its channels, in one
// command.
type subChange struct {
	channels    []string
	unsubscribe bool
}

// Subscribe starts node i's subscriber, whose changes each get timeout. It
// calls confirmed with each channel the node confirmed a subscription to,
// and message with each channel a message came on. Call it from within a
// public call, so that Life counts its goroutines.
func (p *Set) Subscribe(i int, timeout time.Duration, confirmed, message func(channel string)) *Subscriber {
	s := &Subscriber{p: p, ps: subscribeClient(p.nodes[i].client, timeout).Subscribe(context.Background()), timeout: timeout,
		confirmed: confirmed, message: message, kick: make(chan struct{}, 1)}
	p.Life.Add(2)
	go s.apply()
	go s.receive()
	return s
}

// subscribeClient is the client a subscriber of c connects through. go-redis
// runs a subscription's handshake (HELLO, on each new connection) on the
// client's ReadTimeout, whatever the context says, and sends it again up
// to MaxRetries times: on a node that takes connections but does not
// answer, a *redis.Client with default options held a subscriber 12 s, and
// one with ReadTimeout -1 for ever, past Close. The subscriber of a
// *redis.Client connects through a copy of it (WithTimeout shares its
// pools, dialer, credentials and hooks) whose every read and write gets
// timeout, sent once; reading messages has no deadline either way
// (Receive). A Cluster or Ring client is used as it is.
func subscribeClient(c redis.UniversalClient, timeout time.Duration) redis.UniversalClient {
	rc, ok := c.(*redis.Client)
	if !ok {
		return c
	}
	cp := rc.WithTimeout(timeout)
	if cp == rc || cp.Options() == rc.Options() {
		return c // not a copy: changing it would change the user's client
	}
	cp.Options().MaxRetries = -1
	return cp
}

// Change queues a change of the subscription to channels, sent as one
// command.
func (s *Subscriber) Change(unsubscribe bool, channels ...string) {
	s.mu.Lock()
	s.pending = append(s.pending, subChange{channels, unsubscribe})
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// apply sends the subscription changes, each with a deadline. A change that
// fails is not retried here: go-redis keeps the channel list and
// resubscribes when it reconnects, and the waiters fall back to polling.
func (s *Subscriber) apply() {
	life := &s.p.Life
	defer life.End()
	for {
		select {
		case <-s.kick:
		case <-life.Closing:
			_ = s.ps.Close() // ends receive
			return
		}
		s.mu.Lock()
		ops := s.pending
		s.pending = nil
		s.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			if op.unsubscribe {
				_ = s.ps.Unsubscribe(ctx, op.channels...)
			} else {
				_ = s.ps.Subscribe(ctx, op.channels...)
			}
			cancel()
		}
	}
}

// receive dispatches the node's messages. On an error (the node is down, the
// connection broke, pub/sub is refused) it waits before reading again, so a
// dead node costs no busy loop; go-redis reconnects and resubscribes.
func (s *Subscriber) receive() {
	life := &s.p.Life
	defer life.End()
	t := &s.p.timing
	backoff := t.SubRetryMin
	for {
		msg, err := s.ps.Receive(context.Background())
		if err != nil {
			select {
			case <-life.Closing:
				return
			case <-time.After(backoff):
				backoff = min(2*backoff, t.SubRetryMax)
			}
			continue
		}
		backoff = t.SubRetryMin
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.confirmed(m.Channel)
			}
		case *redis.Message:
			s.message(m.Channel)
		}
	}
}
