//go:build !unix

package broker

// fileLimit is unknown here: max.connections defaults to no cap.
func fileLimit() int { return 0 }
