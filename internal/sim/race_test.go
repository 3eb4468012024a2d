//go:build race

package sim

// raceOn is whether the race detector is on: it makes the simulator some
// ten times slower, so that TestSim runs less by default.
const raceOn = true
