package redlockotel

import (
	"container/list"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// event is a span event held until its operation's span is made.
type event struct {
	name  string
	at    time.Time
	attrs []attribute.KeyValue
}

// pending holds the events of keys whose operation has not ended yet, within
// two bounds: maxKeys keys, the least recently touched evicted first, and
// maxEvents events per key, the oldest dropped first. Memory stays bounded
// however many keys pass through, including keys whose events no operation
// ever takes (late replies after a Release returned).
type pending struct {
	maxKeys, maxEvents int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *held
	order list.List                // of *held, least recently touched first
}

type held struct {
	key     string
	events  []event
	dropped int // events dropped for want of room
}

func newPending(maxKeys, maxEvents int) *pending {
	return &pending{maxKeys: maxKeys, maxEvents: maxEvents, keys: make(map[string]*list.Element)}
}

func (p *pending) add(key string, e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.keys[key]
	if ok {
		p.order.MoveToBack(el)
	} else {
		if len(p.keys) >= p.maxKeys {
			oldest := p.order.Front()
			p.order.Remove(oldest)
			delete(p.keys, oldest.Value.(*held).key)
		}
		el = p.order.PushBack(&held{key: key})
		p.keys[key] = el
	}
	h := el.Value.(*held)
	if len(h.events) == p.maxEvents {
		// Shift rather than reslice: a reslice would keep growing the
		// backing array of a key that is never taken.
		copy(h.events, h.events[1:])
		h.events = h.events[:len(h.events)-1]
		h.dropped++
	}
	h.events = append(h.events, e)
}

// take returns the events held for key that happened from since to until,
// and how many events of the key were dropped for want of room. Earlier
// events belong to an earlier operation and are discarded; later ones came
// while the operation's span was being made, and stay held for the next.
func (p *pending) take(key string, since, until time.Time) ([]event, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.keys[key]
	if !ok {
		return nil, 0
	}
	h := el.Value.(*held)
	// Events of different goroutines are held in the order they came, not
	// strictly in the order of their times: look at each.
	var taken, later []event
	for _, e := range h.events {
		switch {
		case e.at.Before(since):
		case e.at.After(until):
			later = append(later, e)
		default:
			taken = append(taken, e)
		}
	}
	dropped := h.dropped
	if len(later) == 0 {
		p.order.Remove(el)
		delete(p.keys, key)
	} else {
		h.events, h.dropped = later, 0
	}
	return taken, dropped
}

// size returns how many keys have events held.
func (p *pending) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}
