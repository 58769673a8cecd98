package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCheck feeds any bytes to the history reader and whatever it
// accepts to every checker: a history edited by hand, cut short or made
// up must give an error or a verdict, never a crash or a hang. The seeds
// are the crafted histories of tests/fault/testdata.
func FuzzCheck(f *testing.F) {
	seeds, _ := filepath.Glob("../../fault/testdata/*/*.jsonl")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "h.jsonl")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ops, err := loadHistory(path)
		if err != nil {
			return
		}
		for w, check := range checkers {
			s := summary{workload: w}
			s.countOps(ops)
			check(ops, &s, checkLimits{maxSteps: 100000, deadline: time.Now().Add(time.Second), text: "fuzz"})
		}
	})
}
