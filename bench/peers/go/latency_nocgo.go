//go:build !cgo

package main

import "errors"

// latency needs its pinger on a plain thread (latency.go), which takes
// cgo; a build without it (a cross build) reports the case as failed.
func benchLatency(procs int) error {
	return errors.New("latency needs cgo")
}
