package redlock

import (
	"strings"
	"testing"
)

// TestReleaseChannelSpelling: the scripts that publish to a key's release
// channel, or count its subscribers, spell its name as a Lua literal; it
// must be releaseChannelPrefix, which the waiters subscribe to.
func TestReleaseChannelSpelling(t *testing.T) {
	for name, src := range map[string]string{"release.lua": releaseSrc, "release_all.lua": releaseAllSrc, "handover.lua": handoverSrc} {
		want := "'" + releaseChannelPrefix + "' .. "
		if n, all := strings.Count(src, want), strings.Count(src, "redlock:released"); n != 1 || all != 1 {
			t.Errorf("scripts/%s: %d uses of %s, %d spellings of the channel in all; want one", name, n, want, all)
		}
	}
}
