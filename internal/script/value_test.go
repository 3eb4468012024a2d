package script

import (
	"strings"
	"testing"
)

// TestPrefixes: a Lock's values are its own prefix and a generation; an
// owner's Lock matches its owner's prefix when it takes over, and reads
// back its own token from what it wrote.
func TestPrefixes(t *testing.T) {
	plain := NewPrefixes("", false, "")
	if len(plain.Token) != 26 || plain.TakesOver() {
		t.Fatalf("a plain Lock's token %q (%d characters), takes over: %v", plain.Token, len(plain.Token), plain.TakesOver())
	}
	if v := plain.At(7); v.S != plain.Token+".7" || v.Gen != 7 || v.Prefix != plain.Token+"." || v.Holder != v.Prefix {
		t.Fatalf("value %+v", v)
	}
	a, b := NewPrefixes("order-42", true, ""), NewPrefixes("order-42", true, "")
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

// TestMetadataInPrefix: holder metadata rides in the Lock's own prefix as
// letters and digits only, whatever its text, and reads back from what a
// node stores; an owner's Locks still match their owner's prefix.
func TestMetadataInPrefix(t *testing.T) {
	md := "host-7 pid 42 ~|,:!. \u00e9t\u00e9"
	for _, p := range []Prefixes{NewPrefixes("", false, md), NewPrefixes("order-42", true, md)} {
		v := p.At(3)
		own := v.Prefix.(string)
		if strings.Trim(own[:len(own)-1], "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567o~m") != "" || strings.Count(own, ".") != 1 {
			t.Fatalf("prefix %q holds more than letters, digits, a tilde and its dot", own)
		}
		for _, stored := range []string{v.S, v.S + ",1700000000000!0123456789abcdef:3"} {
			token, ok := HolderToken(stored)
			if !ok || !p.Mine(token) || Metadata(token) != md {
				t.Fatalf("HolderToken(%q) = %q, %v: metadata %q", stored, token, ok, Metadata(token))
			}
		}
	}
	owned, bare := NewPrefixes("order-42", true, md), NewPrefixes("order-42", true, "")
	if owned.At(1).Holder != bare.At(1).Holder {
		t.Fatal("metadata changed the owner's prefix, which another Lock of the owner matches")
	}
	if Metadata(bare.Token) != "" || Metadata(rand26()) != "" || Metadata("o"+strings.Repeat("A", 25)+"~ABCDEFGHIJ") != "" {
		t.Fatal("metadata read from a token without any")
	}
}

func TestCheckMetadata(t *testing.T) {
	for md, want := range map[string]string{
		"":                        "",
		"web-3 pid 4242 req 9f1c": "",
		strings.Repeat("x", 128):  "",
		strings.Repeat("x", 129):  "129 bytes, over 128",
		"bad \xff byte":           "not UTF-8",
		"line\nbreak":             "a control character",
		"bell\a":                  "a control character",
	} {
		if got := CheckMetadata(md, 128); got != want {
			t.Errorf("CheckMetadata(%q) = %q, want %q", md, got, want)
		}
	}
}

func rand26() string { p := NewPrefixes("", false, ""); return p.Token }
