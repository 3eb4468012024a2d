package redlock

import (
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/waiting"
)

// TestReleaseChannelSpelling: the scripts that publish to a key's release
// channel, or count its subscribers, spell its name as a Lua literal; it
// must be waiting.ChannelPrefix, which the waiters subscribe to.
func TestReleaseChannelSpelling(t *testing.T) {
	for name, src := range map[string]string{"release.lua": releaseSrc, "release_all.lua": releaseAllSrc, "handover.lua": handoverSrc,
		"shared.lua": sharedSrc} {
		want := "'" + waiting.ChannelPrefix + "' .. "
		if n, all := strings.Count(src, want), strings.Count(src, "redlock:released"); n != 1 || all != 1 {
			t.Errorf("scripts/%s: %d uses of %s, %d spellings of the channel in all; want one", name, n, want, all)
		}
	}
}

// TestWaitRoomSpelling: the scripts that name a key's waiting room spell
// its suffix as a Lua literal; it must be waitSuffix, which reservedKey
// keeps out of lock keys.
func TestWaitRoomSpelling(t *testing.T) {
	for name, src := range map[string]string{"wait.lua": waitSrc, "acquire_fast.lua": acquireFastSrc} {
		want := "K .. '" + waitSuffix + "'"
		if name == "acquire_fast.lua" {
			want = "KEYS[1] .. '" + waitSuffix + "'"
		}
		if n, all := strings.Count(src, want), strings.Count(src, "redlock:wait"); n != 1 || all != 1 {
			t.Errorf("scripts/%s: %d uses of %s, %d spellings of the suffix in all; want one", name, n, want, all)
		}
	}
	for _, src := range []string{takeFairSrc, announceSrc, acquireSharedSrc, handoverSrc, takeSrc, takeAllSrc} {
		if strings.Contains(src, "redlock:wait") {
			t.Errorf("a script spells the waiting room's suffix itself instead of calling wait_key: %.60q", src)
		}
	}
}
