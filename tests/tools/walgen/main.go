// walgen writes and reads WAL directories with etcd 3.4's own wal package
// (Debian's golang-etcd-server-dev), so that cetcd's WAL can be checked
// against etcd's: a WAL one writes must read back the same in the other,
// byte for byte the same when both write the same records.
//
//	walgen write DIR [-n N] [-seed S] [-batch B] [-segment BYTES]
//	             [-meta TEXT] [-snap-every K] [-rewind-every R]
//	    creates DIR (or opens it and appends after its last entry) and
//	    saves N generated entries in batches of 1..B, each batch followed
//	    by a hard state, as etcd's WAL.Save does; -snap-every saves a
//	    snapshot record at index K*m (with that entry's term) whenever the
//	    commit index passes K*m (only for entries saved in this run);
//	    -rewind-every makes every Rth batch start 2 entries back, so that
//	    later entries replace earlier ones with a higher term.
//	walgen read DIR [-snap-index I -snap-term T]
//	    prints the metadata, hard state and entries ReadAll returns.
//
// The entry generator is deterministic and mirrored by cetcd's test tool
// (tests/unit/raftd/wal/test_wal_interop.c); both print the same text.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"

	"go.etcd.io/etcd/raft/raftpb"
	"go.etcd.io/etcd/wal"
	"go.etcd.io/etcd/wal/walpb"
	"go.uber.org/zap"
)

type rng struct{ s uint64 }

// next is splitmix64.
func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func termOf(index, gen uint64) uint64 { return 1 + (index-1)/13 + gen }

func genEntry(seed, index, gen uint64) raftpb.Entry {
	r := rng{seed*1000003 + index*7 + gen}
	e := raftpb.Entry{Index: index, Term: termOf(index, gen)}
	if r.next()%29 == 0 {
		e.Type = raftpb.EntryConfChange
	}
	x := r.next()
	var n uint64
	switch x % 10 {
	case 0:
		n = 0
	case 8:
		n = (x >> 8) % 3000
	case 9:
		n = (x>>8)%20000 + 1000
	default:
		n = (x >> 8) % 200
	}
	if n > 0 {
		e.Data = make([]byte, n)
		for i := range e.Data {
			e.Data[i] = byte(r.next() >> 56)
		}
	}
	return e
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "walgen:", err)
	os.Exit(1)
}

func write(dir string, args []string) {
	fs := flag.NewFlagSet("write", flag.ExitOnError)
	n := fs.Uint64("n", 100, "entries to save")
	seed := fs.Uint64("seed", 1, "generator seed")
	batch := fs.Uint64("batch", 5, "largest batch")
	segment := fs.Int64("segment", wal.SegmentSizeBytes, "segment size in bytes")
	meta := fs.String("meta", "cetcd-walgen", "metadata")
	snapEvery := fs.Uint64("snap-every", 0, "snapshot record every K committed entries")
	rewindEvery := fs.Uint64("rewind-every", 0, "every Rth batch starts 2 entries back")
	fs.Parse(args)
	wal.SegmentSizeBytes = *segment

	var w *wal.WAL
	var err error
	var last uint64
	if wal.Exist(dir) {
		if w, err = wal.Open(zap.NewNop(), dir, walpb.Snapshot{}); err != nil {
			die(err)
		}
		_, _, ents, err := w.ReadAll()
		if err != nil {
			die(err)
		}
		if len(ents) > 0 {
			last = ents[len(ents)-1].Index
		}
	} else if w, err = wal.Create(zap.NewNop(), dir, []byte(*meta)); err != nil {
		die(err)
	}
	br := rng{*seed ^ 0xabcdef ^ last}
	var gen, batches, snapMark uint64
	terms := map[uint64]uint64{} // index -> term of the entries saved here
	end := last + *n
	for last < end {
		size := 1 + br.next()%*batch
		start := last + 1
		batches++
		if *rewindEvery > 0 && batches%*rewindEvery == 0 && start > 3 {
			start -= 2
			gen++
		}
		var ents []raftpb.Entry
		for i := uint64(0); i < size && start+i <= end; i++ {
			ents = append(ents, genEntry(*seed, start+i, gen))
		}
		for _, e := range ents {
			terms[e.Index] = e.Term
		}
		last = ents[len(ents)-1].Index
		hs := raftpb.HardState{Term: ents[len(ents)-1].Term, Vote: 1 + last%3}
		if last > 3 {
			hs.Commit = last - 3
		}
		if err := w.Save(hs, ents); err != nil {
			die(err)
		}
		if *snapEvery > 0 && hs.Commit/(*snapEvery) > snapMark {
			// a snapshot at the last multiple of K the commit passed
			// (committed entries are never replaced, so its term stays)
			snapMark = hs.Commit / *snapEvery
			index := snapMark * *snapEvery
			snap := walpb.Snapshot{Index: index, Term: terms[index]}
			if err := w.SaveSnapshot(snap); err != nil {
				die(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		die(err)
	}
}

func read(dir string, args []string) {
	fs := flag.NewFlagSet("read", flag.ExitOnError)
	index := fs.Uint64("snap-index", 0, "snapshot index to read after")
	term := fs.Uint64("snap-term", 0, "snapshot term")
	fs.Parse(args)
	w, err := wal.OpenForRead(zap.NewNop(), dir, walpb.Snapshot{Index: *index, Term: *term})
	if err != nil {
		die(err)
	}
	meta, st, ents, err := w.ReadAll()
	if err != nil {
		die(err)
	}
	if meta == nil {
		fmt.Println("metadata none")
	} else {
		fmt.Printf("metadata %s\n", hex.EncodeToString(meta))
	}
	fmt.Printf("state %d %d %d\n", st.Term, st.Vote, st.Commit)
	fmt.Printf("entries %d\n", len(ents))
	for _, e := range ents {
		d := "-"
		if len(e.Data) > 0 {
			d = hex.EncodeToString(e.Data)
		}
		fmt.Printf("%d %d %d %d %s\n", e.Index, e.Term, e.Type, len(e.Data), d)
	}
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: walgen write|read DIR [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "write":
		write(os.Args[2], os.Args[3:])
	case "read":
		read(os.Args[2], os.Args[3:])
	default:
		fmt.Fprintln(os.Stderr, "usage: walgen write|read DIR [flags]")
		os.Exit(2)
	}
}
