// corruptdb changes a stopped member's db the way etcd's e2e test
// TestEtcdCorruptHash does (tests/e2e/etcd_corrupt_test.go, corruptHash):
// with the real bbolt, every value of the "key" bucket is decoded as an
// mvccpb.KeyValue, the first byte of its key and of its value incremented,
// and written back. The member's hash then differs from its peers' at the
// same revision.
//
//	corruptdb DB
package main

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/mvcc/mvccpb"
)

func corrupt(path string) (int, error) {
	db, err := bolt.Open(path, 0600, &bolt.Options{})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("got nil bucket for 'key'")
		}
		var keys, vals [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			if len(kv.Key) == 0 || len(kv.Value) == 0 {
				continue // a tombstone or an empty value: nothing to change
			}
			kv.Key[0]++
			kv.Value[0]++
			v2, err := kv.Marshal()
			if err != nil {
				return err
			}
			keys = append(keys, append([]byte(nil), k...))
			vals = append(vals, v2)
		}
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	return n, err
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: corruptdb DB")
		os.Exit(2)
	}
	n, err := corrupt(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "corruptdb:", err)
		os.Exit(1)
	}
	fmt.Printf("changed %d entries of the key bucket\n", n)
}
