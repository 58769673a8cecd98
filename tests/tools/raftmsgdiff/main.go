// raftmsgdiff encodes and decodes raftpb messages with etcd 3.4's own
// gogo-generated code (Debian's golang-etcd-server-dev), so that cetcd's
// raftpb codec (raftd/raft/raftmsg.c) can be compared with etcd's on the same
// messages and bytes.
//
//	raftmsgdiff gen SEED COUNT
//	    prints COUNT random cases, one per line: "<Kind> <hex>", where
//	    Kind is Message, Entry, Snapshot or ConfChange and hex is what
//	    etcd's Marshal makes of a random value of that type.
//	raftmsgdiff decode
//	    reads such lines and prints, per line, "OK <hex>" when etcd's
//	    Unmarshal takes the bytes (hex: what Marshal makes of the decoded
//	    value, unknown fields dropped), "ERR" when it refuses them, or
//	    "PANIC" when the decoder panics.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"

	"go.etcd.io/etcd/raft/raftpb"
)

type codec interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func value(r *rand.Rand) uint64 {
	switch r.Intn(5) {
	case 0:
		return 0
	case 1:
		return uint64(r.Intn(128))
	case 2:
		return uint64(r.Intn(1 << 20))
	case 3:
		return uint64(1)<<uint(r.Intn(64)) - uint64(r.Intn(2))
	default:
		return r.Uint64()
	}
}

func enum(r *rand.Rand, max int) int32 {
	switch r.Intn(8) {
	case 0:
		return int32(r.Uint32()) // negative ones too
	case 1:
		return 0
	default:
		return int32(r.Intn(max + 1))
	}
}

// bytes: nil, empty, or random, mostly short, sometimes past 127 bytes
// (a two-byte length).
func bytes(r *rand.Rand) []byte {
	switch r.Intn(6) {
	case 0, 1:
		return nil
	case 2:
		return []byte{}
	case 3:
		b := make([]byte, r.Intn(400))
		r.Read(b)
		return b
	default:
		b := make([]byte, r.Intn(24))
		r.Read(b)
		return b
	}
}

func ids(r *rand.Rand) []uint64 {
	if r.Intn(3) == 0 {
		return nil
	}
	out := make([]uint64, r.Intn(6))
	for i := range out {
		out[i] = value(r)
	}
	return out
}

func entry(r *rand.Rand) raftpb.Entry {
	return raftpb.Entry{Term: value(r), Index: value(r),
		Type: raftpb.EntryType(enum(r, 2)), Data: bytes(r)}
}

func snapshot(r *rand.Rand) raftpb.Snapshot {
	if r.Intn(3) == 0 {
		return raftpb.Snapshot{}
	}
	return raftpb.Snapshot{
		Data: bytes(r),
		Metadata: raftpb.SnapshotMetadata{
			ConfState: raftpb.ConfState{Voters: ids(r), Learners: ids(r),
				VotersOutgoing: ids(r), LearnersNext: ids(r), AutoLeave: r.Intn(2) == 0},
			Index: value(r), Term: value(r),
		},
	}
}

func message(r *rand.Rand) *raftpb.Message {
	m := &raftpb.Message{
		Type: raftpb.MessageType(enum(r, 18)), To: value(r), From: value(r),
		Term: value(r), LogTerm: value(r), Index: value(r), Commit: value(r),
		Snapshot: snapshot(r), Reject: r.Intn(2) == 0, RejectHint: value(r),
	}
	if r.Intn(2) == 0 {
		m.Entries = make([]raftpb.Entry, r.Intn(6))
		for i := range m.Entries {
			m.Entries[i] = entry(r)
		}
	}
	switch r.Intn(4) {
	case 0:
		m.Context = []byte("CampaignTransfer")
	case 1:
		m.Context = []byte{0, 0, 0, 0, 0, 0, 1, 2}
	default:
		m.Context = bytes(r)
	}
	return m
}

func random(r *rand.Rand) (string, codec) {
	switch n := r.Intn(10); {
	case n < 7:
		return "Message", message(r)
	case n == 7:
		e := entry(r)
		return "Entry", &e
	case n == 8:
		s := snapshot(r)
		return "Snapshot", &s
	default:
		return "ConfChange", &raftpb.ConfChange{ID: value(r),
			Type: raftpb.ConfChangeType(enum(r, 3)), NodeID: value(r), Context: bytes(r)}
	}
}

func blank(kind string) codec {
	switch kind {
	case "Message":
		return &raftpb.Message{}
	case "Entry":
		return &raftpb.Entry{}
	case "Snapshot":
		return &raftpb.Snapshot{}
	case "ConfChange":
		return &raftpb.ConfChange{}
	}
	return nil
}

// dropUnknown clears what Unmarshal kept of unknown fields, so that the
// re-encoding shows the decoded fields alone (cetcd drops unknown fields).
func dropUnknown(v codec) {
	snap := func(s *raftpb.Snapshot) {
		s.XXX_unrecognized = nil
		s.Metadata.XXX_unrecognized = nil
		s.Metadata.ConfState.XXX_unrecognized = nil
	}
	switch m := v.(type) {
	case *raftpb.Message:
		m.XXX_unrecognized = nil
		for i := range m.Entries {
			m.Entries[i].XXX_unrecognized = nil
		}
		snap(&m.Snapshot)
	case *raftpb.Entry:
		m.XXX_unrecognized = nil
	case *raftpb.Snapshot:
		snap(m)
	case *raftpb.ConfChange:
		m.XXX_unrecognized = nil
	}
}

func decode(kind, h string) (out string) {
	defer func() {
		if recover() != nil {
			out = "PANIC"
		}
	}()
	v := blank(kind)
	if v == nil {
		return "ERR unknown kind " + kind
	}
	b := []byte{}
	if h != "-" {
		var err error
		if b, err = hex.DecodeString(h); err != nil {
			return "ERR bad hex"
		}
	}
	if v.Unmarshal(b) != nil {
		return "ERR"
	}
	dropUnknown(v)
	enc, err := v.Marshal()
	if err != nil {
		return "ERR marshal: " + err.Error()
	}
	return "OK " + hexOrDash(enc)
}

func hexOrDash(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if len(os.Args) == 4 && os.Args[1] == "gen" {
		seed, err1 := strconv.ParseInt(os.Args[2], 10, 64)
		count, err2 := strconv.Atoi(os.Args[3])
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "usage: raftmsgdiff gen SEED COUNT")
			os.Exit(2)
		}
		r := rand.New(rand.NewSource(seed))
		for i := 0; i < count; i++ {
			kind, v := random(r)
			b, err := v.Marshal()
			if err != nil {
				fmt.Fprintln(os.Stderr, "marshal:", err)
				os.Exit(1)
			}
			fmt.Fprintf(w, "%s %s\n", kind, hexOrDash(b))
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "decode" {
		s := bufio.NewScanner(os.Stdin)
		s.Buffer(make([]byte, 1<<20), 1<<26)
		for s.Scan() {
			f := strings.Fields(s.Text())
			if len(f) != 2 {
				fmt.Fprintln(w, "ERR bad line")
				continue
			}
			fmt.Fprintln(w, decode(f[0], f[1]))
		}
		if err := s.Err(); err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "usage: raftmsgdiff gen SEED COUNT | raftmsgdiff decode")
	os.Exit(2)
}
