package engine

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Misconfigured nodes: a node's credentials or ACL that refuse the
// library's commands, and a replica given as a node, are errors of
// configuration, which waiting does not mend. The public package
// re-exports these sentinels under the same names; their meaning is
// documented there.
var (
	ErrAuth         = errors.New("redlock: authentication refused by the node")
	ErrNoPermission = errors.New("redlock: permission denied by the node's ACL")
	ErrReplica      = fmt.Errorf("%w: a node is a replica", ErrInvalidArgument)
)

// configError is a node's refusal of our credentials or rights: the
// server's own words, and the sentinel it matches.
type configError struct {
	kind  error
	cause error
}

func (e *configError) Error() string {
	return e.cause.Error() + " (" + strings.TrimPrefix(e.kind.Error(), "redlock: ") + ")"
}

func (e *configError) Unwrap() []error { return []error{e.cause, e.kind} }

// Misconfig returns err as a configuration error when it is a node's
// refusal of our credentials (NOAUTH, WRONGPASS, a failed AUTH) or of
// our rights (NOPERM, or a script's command or key refused by the ACL),
// matching ErrAuth or ErrNoPermission, and nil otherwise.
func Misconfig(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrAuth) || errors.Is(err, ErrNoPermission) {
		return err
	}
	var kind error
	switch msg := err.Error(); {
	case hasCode(msg, "NOAUTH"), hasCode(msg, "WRONGPASS"), strings.HasPrefix(msg, "failed to authenticate: "):
		kind = ErrAuth
	case hasCode(msg, "NOPERM"), strings.Contains(msg, "The user executing the script can't"):
		kind = ErrNoPermission
	default:
		return nil
	}
	return &configError{kind: kind, cause: err}
}

// hasCode reports whether msg is a Redis error reply with code, as
// go-redis shows it.
func hasCode(msg, code string) bool {
	return strings.HasPrefix(msg, code+" ") || msg == code
}

// IsMisconfig reports whether err matches ErrAuth or ErrNoPermission.
func IsMisconfig(err error) bool {
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrNoPermission)
}

// asMisconfig is err as a configuration error when it is one, else err.
func asMisconfig(err error) error {
	if m := Misconfig(err); m != nil {
		return m
	}
	return err
}

// role is what ROLE says of a server: whether it is a replica, and of
// which master.
type role struct {
	replica bool
	master  string // host:port of a replica's master
}

// readRole reads a server's reply to ROLE. ok is false when the server
// did not tell (an ACL without ROLE, a server without it, a reply we do
// not know): it is then trusted as configured. err is set when the
// server could not answer (not reached, our credentials refused).
func readRole(cmd *redis.Cmd) (r role, ok bool, err error) {
	v, err := cmd.Slice()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && !errors.Is(Misconfig(err), ErrAuth) {
			return role{}, false, nil // an answer (an ACL without ROLE): it does not say
		}
		return role{}, false, err
	}
	if len(v) == 0 {
		return role{}, false, nil
	}
	switch kind, _ := v[0].(string); kind {
	case "master":
		return role{}, true, nil
	case "slave", "replica":
		r.replica = true
		if len(v) >= 3 {
			host, _ := v[1].(string)
			var port string
			switch p := v[2].(type) {
			case int64:
				port = strconv.FormatInt(p, 10)
			case string:
				port = p
			}
			if host != "" && port != "" {
				r.master = net.JoinHostPort(host, port)
			}
		}
		return r, true, nil
	}
	return role{}, false, nil // a sentinel's, or a reply we do not know
}
