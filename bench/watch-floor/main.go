// watch-floor: a server for etcd's benchmark tool that does no work of its
// own, to show what the tool's watch-latency figure measures on a machine.
//
// It serves KV.Put and Watch (creates) from memory: no disk, no consensus.
// A put hands one event to every watcher on its key to the transport, waits
// -lead, and then answers. etcd's tool takes its start time when the put's
// answer arrives, so its figure for this server is the client's own time to
// hand the events to its watchers, less the lead.
//
//	watch-floor -listen 127.0.0.1:PORT -lead 0
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"go.etcd.io/etcd/mvcc/mvccpb"
	"google.golang.org/grpc"
)

type watcher struct {
	id       int64
	key, end []byte
}

// stream is one Watch stream; mu orders its sends.
type stream struct {
	mu       sync.Mutex
	ws       pb.Watch_WatchServer
	watchers []watcher
}

type server struct {
	lead    time.Duration
	mu      sync.Mutex
	rev     int64
	streams map[*stream]struct{}
}

var errNotServed = errors.New("watch-floor serves Put and Watch only")

func (s *server) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: s.rev, RaftTerm: 2}
}

func (w watcher) matches(key []byte) bool {
	if len(w.end) == 0 {
		return bytes.Equal(key, w.key)
	}
	return bytes.Compare(key, w.key) >= 0 && (bytes.Equal(w.end, []byte{0}) || bytes.Compare(key, w.end) < 0)
}

func (s *server) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	s.mu.Lock()
	s.rev++
	h := s.header()
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	ev := []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{
		Key: r.Key, Value: r.Value, CreateRevision: 2, ModRevision: h.Revision, Version: h.Revision - 1}}}
	for _, st := range streams {
		st.mu.Lock()
		for _, w := range st.watchers {
			if w.matches(r.Key) {
				st.ws.Send(&pb.WatchResponse{Header: h, WatchId: w.id, Events: ev})
			}
		}
		st.mu.Unlock()
	}
	if s.lead > 0 {
		time.Sleep(s.lead)
	}
	return &pb.PutResponse{Header: h}, nil
}

func (s *server) Watch(ws pb.Watch_WatchServer) error {
	st := &stream{ws: ws}
	defer func() { s.mu.Lock(); delete(s.streams, st); s.mu.Unlock() }()
	for {
		req, err := ws.Recv()
		if err != nil {
			return err
		}
		c := req.GetCreateRequest()
		if c == nil {
			continue
		}
		s.mu.Lock()
		st.mu.Lock()
		w := watcher{id: int64(len(st.watchers)), key: c.Key, end: c.RangeEnd}
		st.watchers = append(st.watchers, w)
		err = ws.Send(&pb.WatchResponse{Header: s.header(), WatchId: w.id, Created: true})
		st.mu.Unlock()
		s.streams[st] = struct{}{}
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (s *server) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) {
	return nil, errNotServed
}
func (s *server) DeleteRange(context.Context, *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return nil, errNotServed
}
func (s *server) Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error) {
	return nil, errNotServed
}
func (s *server) Compact(context.Context, *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return nil, errNotServed
}

func main() {
	listen := flag.String("listen", "127.0.0.1:2399", "address to serve gRPC on")
	lead := flag.Duration("lead", 0, "time between handing a put's events to the transport and answering the put")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	s := &server{lead: *lead, rev: 1, streams: map[*stream]struct{}{}}
	pb.RegisterKVServer(g, s)
	pb.RegisterWatchServer(g, s)
	log.Fatal(g.Serve(l))
}
