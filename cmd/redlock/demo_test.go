package main

import "testing"

// The demo is the README's first command: both of its node kinds must work.
func TestDemo(t *testing.T) {
	for _, inProcess := range []bool{false, true} {
		if err := run("", inProcess, 3, 3); err != nil {
			t.Fatalf("miniredis=%v: %v", inProcess, err)
		}
	}
}
