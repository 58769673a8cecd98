// boltbench measures bbolt, the store etcd uses, with Debian's bbolt package
// (golang-github-coreos-bbolt-dev), as the reference for cetcd's
// build/bin/store_bench: the same flags and the same output lines
// (bench/store-compare.sh runs both side by side).
//
//	boltbench [-n N] [-val V] [-batch B] [-order seq|rand] [-readers R] [-keep] FILE
//
// Put phase: N keys (8-byte big-endian 0..N-1, in key order or shuffled)
// with values of V zero bytes into bucket "key", one bbolt Update (commit,
// fdatasync) every B puts. Get phase: every key once in random order,
// split among R goroutines, each in one View txn, checking each value's
// length. One line per phase:
//
//	put-seq ops=N secs=S ops_per_sec=X     (put-rand with -order rand)
//	get-rand ops=N secs=S ops_per_sec=X
//
// FILE is removed first, and at the end unless -keep is given.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

func key(i uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, i)
	return k
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "boltbench:", err)
	os.Exit(1)
}

func main() {
	n := flag.Uint64("n", 1000000, "keys to write")
	val := flag.Int("val", 256, "value size in bytes")
	batch := flag.Uint64("batch", 10000, "puts per committed transaction")
	order := flag.String("order", "seq", "key order: seq or rand")
	readers := flag.Int("readers", 2, "concurrent readers in the read phase")
	keep := flag.Bool("keep", false, "leave FILE in place at the end")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: boltbench [flags] FILE")
		os.Exit(2)
	}
	if *n == 0 || *batch == 0 || *readers < 1 || *val < 0 {
		fmt.Fprintln(os.Stderr, "boltbench: -n, -batch and -readers must be at least 1, -val at least 0")
		os.Exit(2)
	}
	if *order != "seq" && *order != "rand" {
		fmt.Fprintf(os.Stderr, "boltbench: -order is seq or rand, not %q\n", *order)
		os.Exit(2)
	}
	path := flag.Arg(0)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		fail(err)
	}
	db, err := bolt.Open(path, 0600, nil)
	if err != nil {
		fail(err)
	}
	if !*keep {
		defer os.Remove(path)
	}
	defer db.Close()

	ids := make([]uint64, *n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	if *order == "rand" {
		rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	v := make([]byte, *val)
	start := time.Now()
	for lo := uint64(0); lo < *n; lo += *batch {
		hi := lo + *batch
		if hi > *n {
			hi = *n
		}
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			for _, id := range ids[lo:hi] {
				if err := b.Put(key(id), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("put-%s ops=%d secs=%.3f ops_per_sec=%.0f\n", *order, *n, secs, float64(*n)/secs)

	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	start = time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var readErr error
	per := (len(ids) + *readers - 1) / *readers
	for r := 0; r < *readers; r++ {
		lo, hi := r*per, (r+1)*per
		if lo > len(ids) {
			lo = len(ids)
		}
		if hi > len(ids) {
			hi = len(ids)
		}
		wg.Add(1)
		go func(part []uint64) {
			defer wg.Done()
			err := db.View(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("key"))
				if b == nil {
					return fmt.Errorf("bucket \"key\" is missing")
				}
				for _, id := range part {
					if got := len(b.Get(key(id))); got != *val {
						return fmt.Errorf("key %d: value of %d bytes, want %d", id, got, *val)
					}
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				readErr = err
				mu.Unlock()
			}
		}(ids[lo:hi])
	}
	wg.Wait()
	secs = time.Since(start).Seconds()
	if readErr != nil {
		fail(readErr)
	}
	fmt.Printf("get-rand ops=%d secs=%.3f ops_per_sec=%.0f\n", *n, secs, float64(*n)/secs)
}
