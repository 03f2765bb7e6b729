//go:build race

package broker_test

// raceEnabled: this test binary runs under the race detector, whose
// shadow memory makes the process's resident size several times what it
// would be, so resident-size bounds are checked only without it (make test
// runs TestHostileClients once more without -race for that).
const raceEnabled = true
