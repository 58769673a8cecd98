// peerinterop runs etcd 3.4's own peer transport (rafthttp.Transport, from
// Debian's golang-etcd-server-dev) as one member, with a stub Raft that
// records what it receives, so that cetcd's transport (raftd/peer*.c) can
// exchange messages with the real thing (tests/unit/raftd/peer/test_peer_interop.c).
//
//	peerinterop -id ID -cluster CID -peer ID=URL[,ID=URL...]
//
// It listens on 127.0.0.1 (a free port) and prints "LISTEN <url>", then
// takes commands on stdin, one per line:
//
//	SEND <hex>     sends the raftpb.Message whose Marshal bytes are hex
//	ACTIVE <id>    prints "ACTIVE <id> <unix ns>" (0: not active), the
//	               transport's ActiveSince for that peer
//	QUIT           stops the transport and exits
//
// and prints, as they happen:
//
//	RECV <hex>           a message the stub Raft got (Marshal bytes)
//	UNREACHABLE <id>     the transport's ReportUnreachable
//	SNAPSHOT <id> <ok>   its ReportSnapshot
//	ERROR <text>         an error on the transport's ErrorC
//
// IDs are hex, as etcd writes them.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/etcdserver/api/rafthttp"
	stats "go.etcd.io/etcd/etcdserver/api/v2stats"
	"go.etcd.io/etcd/pkg/types"
	"go.etcd.io/etcd/raft"
	"go.etcd.io/etcd/raft/raftpb"
	"go.uber.org/zap"
)

var outMu sync.Mutex

func say(format string, args ...interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
	os.Stdout.Sync()
}

// stubRaft records what the transport hands to Raft.
type stubRaft struct{}

func (stubRaft) Process(ctx context.Context, m raftpb.Message) error {
	b, err := m.Marshal()
	if err != nil {
		say("ERROR marshal: %v", err)
		return nil
	}
	say("RECV %s", hex.EncodeToString(b))
	return nil
}

func (stubRaft) IsIDRemoved(id uint64) bool { return false }

func (stubRaft) ReportUnreachable(id uint64) { say("UNREACHABLE %x", id) }

func (stubRaft) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	say("SNAPSHOT %x %v", id, status == raft.SnapshotFinish)
}

func parseID(s string) types.ID {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bad id %q\n", s)
		os.Exit(2)
	}
	return types.ID(v)
}

func main() {
	id := flag.String("id", "2", "this member's id (hex)")
	cluster := flag.String("cluster", "1000", "the cluster id (hex)")
	peers := flag.String("peer", "", "ID=URL,... the peers")
	verbose := flag.Bool("v", false, "log the transport's lines to stderr")
	flag.Parse()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "listen: %v\n", err)
		os.Exit(1)
	}
	url := "http://" + ln.Addr().String()
	lg := zap.NewNop()
	if *verbose {
		lg, _ = zap.NewDevelopment()
	}
	tr := &rafthttp.Transport{
		Logger:      lg,
		DialTimeout: time.Second,
		ID:          parseID(*id),
		URLs:        types.MustNewURLs([]string{url}),
		ClusterID:   parseID(*cluster),
		Raft:        stubRaft{},
		ServerStats: stats.NewServerStats("go", *id),
		LeaderStats: stats.NewLeaderStats(*id),
		ErrorC:      make(chan error, 16),
	}
	if err := tr.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "start: %v\n", err)
		os.Exit(1)
	}
	go http.Serve(ln, tr.Handler())
	go func() {
		for err := range tr.ErrorC {
			say("ERROR %v", err)
		}
	}()
	for _, p := range strings.Split(*peers, ",") {
		if p == "" {
			continue
		}
		kv := strings.SplitN(p, "=", 2)
		tr.AddPeer(parseID(kv[0]), []string{kv[1]})
	}
	say("LISTEN %s", url)

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "SEND":
			b, err := hex.DecodeString(f[1])
			var m raftpb.Message
			if err == nil {
				err = m.Unmarshal(b)
			}
			if err != nil {
				say("ERROR bad message: %v", err)
				continue
			}
			tr.Send([]raftpb.Message{m})
		case "ACTIVE":
			since := tr.ActiveSince(parseID(f[1]))
			ns := int64(0)
			if !since.IsZero() {
				ns = since.UnixNano()
			}
			say("ACTIVE %s %d", f[1], ns)
		case "QUIT":
			tr.Stop()
			return
		}
	}
	tr.Stop()
}
