//go:build race

package redlock_test

// nemRace: the race detector multiplies the workers' CPU by five to ten,
// so the nemesis runs fewer of them by default (nemDefaultProcs).
const nemRace = true
