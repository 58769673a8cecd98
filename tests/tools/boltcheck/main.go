// boltcheck opens a db file with the real bbolt library (Debian's
// golang-github-coreos-bbolt-dev), to prove that cetcd's store writes files
// that bbolt (and so etcd and its tools) accept, and reads files that bbolt
// wrote.
//
//	boltcheck [-keys BUCKET] FILE   run bbolt's consistency check, then list
//	                                top-level buckets with their key counts
//	                                (and BUCKET's keys, hex, with value sizes)
//	boltcheck -dump FILE            check, then print every bucket and key,
//	                                recursively, in key order (see dump)
//	boltcheck -text BUCKET FILE     check, then print BUCKET's keys and
//	                                values as text, one "key value" a line
//	boltcheck -stats FILE           check, then print each top-level bucket's
//	                                pages as bbolt counts them (see stats)
//	boltcheck -write FILE [-seed N] [-txns N] [-nofreelistsync] [-pagesize N]
//	                                write a new file with bbolt: nested,
//	                                inline and big buckets, overflow values,
//	                                deletes over many txns
//	boltcheck -modify FILE [-seed N] change an existing file with bbolt
//
// It exits non-zero on any error or check failure.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

func main() {
	keys := flag.String("keys", "", "bucket whose keys to print")
	dump := flag.Bool("dump", false, "print every bucket and key")
	text := flag.String("text", "", "bucket whose keys and values to print as text")
	stats := flag.Bool("stats", false, "print each bucket's pages and fill")
	write := flag.Bool("write", false, "write a new file with bbolt")
	modify := flag.Bool("modify", false, "change an existing file with bbolt")
	seed := flag.Int64("seed", 1, "seed of -write and -modify")
	noFreelistSync := flag.Bool("nofreelistsync", false, "-write: no freelist page (etcd 3.4's NoFreelistSync)")
	pageSize := flag.Int("pagesize", 0, "-write: page size (0 = the OS page size)")
	txns := flag.Int("txns", 40, "-write: number of txns")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: boltcheck [-keys BUCKET | -dump | -text BUCKET | -stats | -write | -modify] FILE")
		os.Exit(2)
	}
	path := flag.Arg(0)
	var err error
	switch {
	case *write:
		err = writeFile(path, *seed, *noFreelistSync, *pageSize, *txns)
	case *modify:
		err = modifyFile(path, *seed)
	default:
		err = checkFile(path, *keys, *dump, *text, *stats)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "boltcheck:", err)
		os.Exit(1)
	}
}

func checkFile(path, keys string, dump bool, text string, stats bool) error {
	db, err := bolt.Open(path, 0400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("open: %v", err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var problems []string
		for e := range tx.Check() {
			problems = append(problems, e.Error())
		}
		if len(problems) > 0 {
			return fmt.Errorf("check: %s", strings.Join(problems, "; "))
		}
		if text != "" {
			b := tx.Bucket([]byte(text))
			if b == nil {
				return fmt.Errorf("no bucket %q", text)
			}
			return b.ForEach(func(k, v []byte) error {
				fmt.Printf("%s %s\n", k, v)
				return nil
			})
		}
		if stats {
			return printStats(db, tx)
		}
		if dump {
			return dumpBucket(tx.Cursor(), nil, func(name []byte) *bolt.Bucket { return tx.Bucket(name) })
		}
		fmt.Printf("ok txid=%d size=%d pagesize=%d\n", tx.ID(), tx.Size(), db.Info().PageSize)
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			fmt.Printf("bucket %q keys=%d\n", name, b.Stats().KeyN)
			if string(name) == keys {
				return b.ForEach(func(k, v []byte) error {
					fmt.Printf("  %x %d\n", k, len(v))
					return nil
				})
			}
			return nil
		})
	})
}

// dumpBucket prints, in key order, "B <path>" for a bucket and
// "K <path> <key> <value length> <fnv64a of value>" for a key, where path
// is the hex names of the enclosing buckets joined by '/'. cetcd's test
// tool prints the same lines, so the two dumps of a file must be equal.
func dumpBucket(c *bolt.Cursor, path []string, open func([]byte) *bolt.Bucket) error {
	p := strings.Join(path, "/")
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if child := open(k); child != nil {
				sub := append(append([]string{}, path...), fmt.Sprintf("%x", k))
				fmt.Printf("B %s\n", strings.Join(sub, "/"))
				if err := dumpBucket(child.Cursor(), sub, child.Bucket); err != nil {
					return err
				}
				continue
			}
		}
		h := fnv.New64a()
		h.Write(v)
		fmt.Printf("K %s %x %d %016x\n", p, k, len(v), h.Sum64())
	}
	return nil
}

// printStats prints, for each top-level bucket, one line of bbolt's
// Bucket.Stats: keys, leaf, branch and overflow pages, the MiB they take,
// and the fill of leaves and branches (bytes in use / bytes of their
// pages); then the file's pages: total, free and pending (the freelist),
// and the freelist's own pages. Inline buckets count in their parent.
func printStats(db *bolt.DB, tx *bolt.Tx) error {
	ps := db.Info().PageSize
	mib := func(pages int) float64 { return float64(pages*ps) / (1 << 20) }
	fill := func(inuse, alloc int) float64 {
		if alloc == 0 {
			return 0
		}
		return float64(inuse) / float64(alloc)
	}
	fmt.Printf("%-18s %9s %8s %7s %8s %8s %9s %9s\n", "bucket", "keys", "leaf", "branch",
		"overflow", "MiB", "leaf-fill", "branch-fill")
	used := 0
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		s := b.Stats()
		pages := s.LeafPageN + s.BranchPageN + s.LeafOverflowN + s.BranchOverflowN
		used += pages
		fmt.Printf("%-18s %9d %8d %7d %8d %8.1f %9.3f %9.3f\n", name, s.KeyN, s.LeafPageN,
			s.BranchPageN, s.LeafOverflowN+s.BranchOverflowN, mib(pages),
			fill(s.LeafInuse, s.LeafAlloc), fill(s.BranchInuse, s.BranchAlloc))
		return nil
	})
	if err != nil {
		return err
	}
	st := db.Stats()
	total := int(tx.Size()) / ps
	fmt.Printf("file pages=%d (%.1f MiB) buckets=%d (%.1f MiB) free=%d pending=%d freelist-bytes=%d\n",
		total, mib(total), used, mib(used), st.FreePageN, st.PendingPageN, st.FreelistInuse)
	return nil
}

func value(r *rand.Rand, n int) []byte {
	v := make([]byte, n)
	r.Read(v)
	return v
}

func key(r *rand.Rand) []byte {
	var k []byte
	switch r.Intn(10) {
	case 0:
		k = value(r, 1+r.Intn(600)) // long binary keys
	default:
		k = []byte(fmt.Sprintf("key-%06d", r.Intn(5000)))
	}
	return k
}

// etcd-like revision keys: 8-byte main revision, '_', 8-byte sub revision.
func revKey(main, sub uint64) []byte {
	k := make([]byte, 17)
	binary.BigEndian.PutUint64(k, main)
	k[8] = '_'
	binary.BigEndian.PutUint64(k[9:], sub)
	return k
}

// churn does txns of random puts and deletes, and nested bucket changes.
func churn(db *bolt.DB, r *rand.Rand, txns int) error {
	for i := 0; i < txns; i++ {
		err := db.Update(func(tx *bolt.Tx) error {
			kb, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			for j := 0; j < 50; j++ {
				main := uint64(i*50 + j + 1)
				n := r.Intn(200)
				if r.Intn(40) == 0 {
					n = 4000 + r.Intn(30000) // overflow pages
				}
				if err := kb.Put(revKey(main, 0), value(r, n)); err != nil {
					return err
				}
			}
			c := kb.Cursor()
			for k, _ := c.First(); k != nil && r.Intn(4) == 0; k, _ = c.Next() {
				if err := kb.Delete(k); err != nil {
					return err
				}
			}
			misc, err := tx.CreateBucketIfNotExists([]byte("misc"))
			if err != nil {
				return err
			}
			for j := 0; j < 20; j++ {
				k := key(r)
				if r.Intn(3) == 0 {
					if misc.Bucket(k) == nil {
						_ = misc.Delete(k)
					}
				} else if misc.Bucket(k) == nil {
					if err := misc.Put(k, value(r, r.Intn(300))); err != nil {
						return err
					}
				}
			}
			// Nested buckets: some small (inline), one big, one emptied.
			nb := []byte(fmt.Sprintf("nested-%d", r.Intn(6)))
			if r.Intn(8) == 0 {
				if misc.Bucket(nb) != nil {
					return misc.DeleteBucket(nb)
				}
				return nil
			}
			if misc.Get(nb) != nil {
				return nil
			}
			child, err := misc.CreateBucketIfNotExists(nb)
			if err != nil {
				return err
			}
			for j := 0; j < r.Intn(8); j++ {
				if err := child.Put(key(r), value(r, r.Intn(40))); err != nil {
					return err
				}
			}
			if bytes.HasSuffix(nb, []byte("-0")) {
				for j := 0; j < 100; j++ {
					if err := child.Put(key(r), value(r, 100)); err != nil {
						return err
					}
				}
				deeper, err := child.CreateBucketIfNotExists([]byte("deeper"))
				if err != nil {
					return err
				}
				return deeper.Put([]byte("x"), value(r, 10))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("empty"))
		return err
	})
}

func writeFile(path string, seed int64, noFreelistSync bool, pageSize, txns int) error {
	_ = os.Remove(path)
	db, err := bolt.Open(path, 0600, &bolt.Options{
		Timeout:        5 * time.Second,
		NoFreelistSync: noFreelistSync,
		PageSize:       pageSize,
	})
	if err != nil {
		return fmt.Errorf("open: %v", err)
	}
	if err := churn(db, rand.New(rand.NewSource(seed)), txns); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

func modifyFile(path string, seed int64) error {
	db, err := bolt.Open(path, 0600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("open: %v", err)
	}
	if err := churn(db, rand.New(rand.NewSource(seed)), 10); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}
