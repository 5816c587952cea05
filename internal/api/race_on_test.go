//go:build race

package api

// raceEnabled: the race detector allocates on its own account, so
// allocation counts are not the program's under it.
const raceEnabled = true
