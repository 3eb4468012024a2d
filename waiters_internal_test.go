package redlock

import (
	"strings"
	"testing"
)

// TestReleaseChannelSpelling: the scripts that publish to a key's release
// channel, or count its subscribers, spell its name as a Lua literal; it
// must be releaseChannelPrefix, which the waiters subscribe to.
func TestReleaseChannelSpelling(t *testing.T) {
	for name, src := range map[string]string{"release.lua": releaseSrc, "release_all.lua": releaseAllSrc, "handover.lua": handoverSrc,
		"shared.lua": sharedSrc} {
		want := "'" + releaseChannelPrefix + "' .. "
		if n, all := strings.Count(src, want), strings.Count(src, "redlock:released"); n != 1 || all != 1 {
			t.Errorf("scripts/%s: %d uses of %s, %d spellings of the channel in all; want one", name, n, want, all)
		}
	}
}

// TestWriterChannelSpelling: the shared acquire counts the subscribers of
// the key's writer channel, which a waiting exclusive Acquire subscribes
// to: the script's literal must be writerChannelPrefix.
func TestWriterChannelSpelling(t *testing.T) {
	want := "'" + writerChannelPrefix + "' .. "
	if n, all := strings.Count(acquireSharedSrc, want), strings.Count(acquireSharedSrc, "redlock:writer"); n != 1 || all != 1 {
		t.Errorf("scripts/acquire_shared.lua: %d uses of %s, %d spellings of the channel in all; want one", n, want, all)
	}
}
