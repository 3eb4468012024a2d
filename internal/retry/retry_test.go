package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExponentialDoublesToMaxWithJitter(t *testing.T) {
	e := Exponential{Min: 8 * time.Millisecond, Max: 100 * time.Millisecond}
	for failed, base := range map[int]time.Duration{1: 8, 2: 16, 3: 32, 4: 64, 5: 100, 60: 100} {
		base *= time.Millisecond
		for range 50 {
			d, ok := e.Backoff(failed)
			require.True(t, ok)
			require.GreaterOrEqual(t, d, base/2, "after %d failures", failed)
			require.LessOrEqual(t, d, base, "after %d failures", failed)
		}
	}
	// A max near the largest duration must not overflow while doubling.
	d, ok := Exponential{Min: time.Second, Max: 1<<63 - 1}.Backoff(200)
	require.True(t, ok)
	require.Positive(t, d)
}

func TestLimitAndNone(t *testing.T) {
	l := Limit{S: Exponential{Min: time.Millisecond, Max: time.Millisecond}, Attempts: 3}
	for failed, want := range map[int]bool{1: true, 2: true, 3: false, 4: false} {
		_, ok := l.Backoff(failed)
		require.Equal(t, want, ok, "after %d failures", failed)
	}
	_, ok := None{}.Backoff(1)
	require.False(t, ok)
}

func TestCheck(t *testing.T) {
	good := Exponential{Min: time.Millisecond, Max: time.Second}
	for s, want := range map[Strategy]string{
		good:                                  "",
		None{}:                                "",
		Limit{S: good, Attempts: 1}:           "",
		Limit{S: nil, Attempts: 2}:            "LimitRetry: nil strategy",
		Limit{S: good, Attempts: 0}:           "LimitRetry: fewer than one attempt",
		Exponential{Min: 0, Max: time.Second}: "ExponentialBackoff: min must be positive and max at least min",
		Limit{S: Exponential{Min: 2, Max: 1}, Attempts: 2}: "ExponentialBackoff: min must be positive and max at least min",
	} {
		require.Equal(t, want, Check(s), "%#v", s)
	}
	require.Equal(t, "WithRetry: nil strategy", Check(nil))
}
