package script

import (
	"strings"
	"testing"
)

// TestPrefixes: a Lock's values are its own prefix and a generation; an
// owner's Lock matches its owner's prefix when it takes over, and reads
// back its own token from what it wrote.
func TestPrefixes(t *testing.T) {
	plain := NewPrefixes("", false)
	if len(plain.Token) != 26 || plain.TakesOver() {
		t.Fatalf("a plain Lock's token %q (%d characters), takes over: %v", plain.Token, len(plain.Token), plain.TakesOver())
	}
	if v := plain.At(7); v.S != plain.Token+".7" || v.Gen != 7 || v.Prefix != plain.Token+"." || v.Holder != v.Prefix {
		t.Fatalf("value %+v", v)
	}
	a, b := NewPrefixes("order-42", true), NewPrefixes("order-42", true)
	if a.Token != b.Token || a.Token != OwnerToken("order-42") || !a.TakesOver() {
		t.Fatalf("owner tokens %q and %q", a.Token, b.Token)
	}
	va, vb := a.At(1), b.At(1)
	if va.Holder != vb.Holder || va.Prefix == vb.Prefix || !strings.HasPrefix(va.S, a.Token+"~") {
		t.Fatalf("two Locks of one owner: %+v and %+v", va, vb)
	}
	for _, stored := range []string{va.S, va.S + "|1700000000000:" + vb.S} {
		token, ok := HolderToken(stored)
		if !ok || !a.Mine(token) || b.Mine(token) {
			t.Fatalf("HolderToken(%q) = %q, %v", stored, token, ok)
		}
	}
	if _, ok := HolderToken("!0123456789abcdef:3"); ok {
		t.Fatal("a tombstone read as a holder")
	}
}
