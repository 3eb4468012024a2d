//go:build !race

package redlock_test

// nemRace: see nemesis_race_test.go.
const nemRace = false
