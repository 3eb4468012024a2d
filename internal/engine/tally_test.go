package engine

import "testing"

// TestTallyByVal: with ByVal a round reaches its quorum only when a quorum
// confirmed the same Val, whatever the other nodes confirmed.
func TestTallyByVal(t *testing.T) {
	var tl Tally
	tl.Init(5, 3)
	tl.byVal = true
	for i, v := range []int64{2, 4, 2, 4} {
		tl.Add(Reply{Node: i, Status: OK, Val: v})
	}
	if tl.Reached() || tl.Confirmed != 2 || tl.Val != 2 {
		t.Fatalf("2+2 split: reached %v, confirmed %d of val %d", tl.Reached(), tl.Confirmed, tl.Val)
	}
	tl.Add(Reply{Node: 4, Status: OK, Val: 4})
	if !tl.Reached() || tl.Confirmed != 3 || tl.Val != 4 {
		t.Fatalf("3 of val 4: reached %v, confirmed %d of val %d", tl.Reached(), tl.Confirmed, tl.Val)
	}

	var plain Tally
	plain.Init(3, 2)
	plain.Add(Reply{Node: 0, Status: OK, Val: 1})
	plain.Add(Reply{Node: 1, Status: OK, Val: 7})
	if !plain.Reached() {
		t.Fatal("without ByVal, any two confirmations are a quorum")
	}
}
