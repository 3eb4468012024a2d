// Package sim is the simulator: the library's real Client, go-redis's real
// clients and in-process Redis nodes (miniredis, with shims where it is not
// Redis) in one testing/synctest bubble, over a simulated network whose
// nodes are near the clients or far (a seed's draw, and far faults that
// move a node away and back), and that delays, reorders across
// connections, drops replies, holds a command back while its connection
// is reset (so that go-redis sends it again) and partitions; nodes that crash and restart with or without their data,
// with the restart guard; node clocks that step and run fast or slow. The
// nemesis's workload runs every primitive, and internal/history judges
// what it recorded, with one rule of its own here: no value may outlive
// the Locks that wrote it (history.Residue).
//
// Time is the bubble's: a simulated hour takes a minute or two of CPU in
// the test's process. TestSim runs each seed in this package's tests built
// for wasip1 and run by internal/wasirun, where the seed fixes everything
// (the faults, every worker's choices, the interleaving of the goroutines),
// so that -sim.seed replays a run exactly and a failing one shrinks to a
// Schedule (replay_test.go, shrink_test.go). docs/testing.md says what it
// models and what it does not.
package sim
