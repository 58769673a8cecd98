// msgappv2diff runs etcd 3.4's own msgappv2 stream encoder and decoder,
// which are unexported in package rafthttp: this one file joins Debian's
// sources of that package at build time (go test -overlay, see
// tests/peer/msgappv2_diff.sh), so that none of etcd's code is copied.
//
// Run as "rafthttp.test -test.run TestCetcdMsgAppV2" with
// CETCD_MSGAPPV2_SEED and CETCD_MSGAPPV2_COUNT set, it prints COUNT
// random streams, one per line:
//
//	<local> <remote> <stream> <sent> <decoded>
//
// stream is the hex of what etcd's encoder wrote for the messages of
// sent; sent and decoded are comma-separated hex raftpb.Messages (as
// Marshal writes them; "-" for an empty list): those given to the
// encoder, and those etcd's decoder (local, remote) read back from the
// stream.
package rafthttp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	stats "go.etcd.io/etcd/etcdserver/api/v2stats"
	"go.etcd.io/etcd/pkg/types"
	"go.etcd.io/etcd/raft/raftpb"
)

func cetcdValue(r *rand.Rand) uint64 {
	switch r.Intn(4) {
	case 0:
		return uint64(r.Intn(128))
	case 1:
		return uint64(r.Intn(1 << 20))
	case 2:
		return uint64(1) << uint(r.Intn(64))
	default:
		return r.Uint64()
	}
}

func cetcdBytes(r *rand.Rand) []byte {
	switch r.Intn(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		b := make([]byte, r.Intn(300))
		r.Read(b)
		return b
	}
}

// cetcdMessage is a MsgApp; when cont, one that continues the stream as
// enc knows it (so the encoder may write the short form).
func cetcdMessage(r *rand.Rand, enc *msgAppV2Encoder, cont bool) raftpb.Message {
	m := raftpb.Message{Type: raftpb.MsgApp, To: cetcdValue(r), From: cetcdValue(r),
		Term: cetcdValue(r), LogTerm: cetcdValue(r), Index: cetcdValue(r),
		Commit: cetcdValue(r), Reject: r.Intn(8) == 0, RejectHint: cetcdValue(r)}
	if r.Intn(8) == 0 {
		m.Type = raftpb.MessageType(r.Intn(19))
	}
	if cont {
		m.Term, m.LogTerm, m.Index = enc.term, enc.term, enc.index
	}
	if r.Intn(4) != 0 {
		m.Entries = make([]raftpb.Entry, r.Intn(5))
		idx := m.Index
		for i := range m.Entries {
			idx++
			m.Entries[i] = raftpb.Entry{Term: m.Term, Index: idx,
				Type: raftpb.EntryType(r.Intn(3)), Data: cetcdBytes(r)}
			if r.Intn(10) == 0 {
				m.Entries[i].Index = cetcdValue(r)
			}
		}
	}
	if r.Intn(6) == 0 {
		m.Context = cetcdBytes(r)
	}
	return m
}

func cetcdHexList(ms []raftpb.Message) string {
	if len(ms) == 0 {
		return "-"
	}
	out := make([]string, len(ms))
	for i := range ms {
		b, err := ms[i].Marshal()
		if err != nil {
			panic(err)
		}
		out[i] = hex.EncodeToString(b)
	}
	return strings.Join(out, ",")
}

func TestCetcdMsgAppV2(t *testing.T) {
	seed, err1 := strconv.ParseInt(os.Getenv("CETCD_MSGAPPV2_SEED"), 10, 64)
	count, err2 := strconv.Atoi(os.Getenv("CETCD_MSGAPPV2_COUNT"))
	if err1 != nil || err2 != nil {
		t.Skip("CETCD_MSGAPPV2_SEED and CETCD_MSGAPPV2_COUNT are not set")
	}
	r := rand.New(rand.NewSource(seed))
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for c := 0; c < count; c++ {
		var stream bytes.Buffer
		enc := newMsgAppV2Encoder(&stream, &stats.FollowerStats{})
		var sent []raftpb.Message
		for n := r.Intn(8); n > 0; n-- {
			var m raftpb.Message
			switch k := r.Intn(10); {
			case k < 2:
				m = linkHeartbeatMessage
			case k < 7:
				m = cetcdMessage(r, enc, true)
			default:
				m = cetcdMessage(r, enc, false)
			}
			if err := enc.encode(&m); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, m)
		}
		local, remote := types.ID(cetcdValue(r)), types.ID(cetcdValue(r))
		dec := newMsgAppV2Decoder(bytes.NewReader(stream.Bytes()), local, remote)
		var got []raftpb.Message
		for range sent {
			m, err := dec.decode()
			if err != nil {
				t.Fatalf("etcd does not decode its own stream: %v", err)
			}
			got = append(got, m)
		}
		s := hex.EncodeToString(stream.Bytes())
		if s == "" {
			s = "-"
		}
		fmt.Fprintf(w, "%d %d %s %s %s\n", uint64(local), uint64(remote), s,
			cetcdHexList(sent), cetcdHexList(got))
	}
}
