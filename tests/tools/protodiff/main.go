// protodiff decodes request bodies with etcd 3.4's own (gogo-generated)
// protobuf decoders, from Debian's golang-etcd-server-dev, or sends them
// to a live etcd or cetcd member as raw gRPC calls, so that cetcd's
// decoder can be compared with etcd's on the same bytes.
//
// Input, one case per line: "<Message> <hex>", where Message is one of
// the request types named below (RangeRequest, PutRequest, ...) and hex
// the encoded body ("-" for an empty one). Output, one line per case:
//
//	protodiff decode
//	    "OK <hex>" when etcd's decoder takes the bytes (hex: what etcd
//	    encodes of the decoded message), else "ERR <text>" with
//	    the error text etcd's gRPC server puts after "grpc: error
//	    unmarshalling request: ". A decoder panic (etcd would crash)
//	    prints "PANIC <value>".
//	protodiff grpc -endpoint HOST:PORT
//	    sends each body as the one message of the request's method (a
//	    stream's first message for Watch, LeaseKeepAlive and Snapshot)
//	    and prints "<grpc status code> <status message>".
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	electionpb "go.etcd.io/etcd/etcdserver/api/v3election/v3electionpb"
	lockpb "go.etcd.io/etcd/etcdserver/api/v3lock/v3lockpb"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
)

type unmarshaler interface {
	Reset()
	Unmarshal([]byte) error
	Marshal() ([]byte, error)
}

type kind struct {
	method string
	msg    func() unmarshaler
}

// The request types gatewayd decodes (tests/proto/requests.h), with the
// method each goes to.
var kinds = map[string]kind{
	"RangeRequest":           {"/etcdserverpb.KV/Range", func() unmarshaler { return &pb.RangeRequest{} }},
	"PutRequest":             {"/etcdserverpb.KV/Put", func() unmarshaler { return &pb.PutRequest{} }},
	"DeleteRangeRequest":     {"/etcdserverpb.KV/DeleteRange", func() unmarshaler { return &pb.DeleteRangeRequest{} }},
	"TxnRequest":             {"/etcdserverpb.KV/Txn", func() unmarshaler { return &pb.TxnRequest{} }},
	"CompactionRequest":      {"/etcdserverpb.KV/Compact", func() unmarshaler { return &pb.CompactionRequest{} }},
	"StatusRequest":          {"/etcdserverpb.Maintenance/Status", func() unmarshaler { return &pb.StatusRequest{} }},
	"MemberListRequest":      {"/etcdserverpb.Cluster/MemberList", func() unmarshaler { return &pb.MemberListRequest{} }},
	"WatchRequest":           {"/etcdserverpb.Watch/Watch", func() unmarshaler { return &pb.WatchRequest{} }},
	"LeaseGrantRequest":      {"/etcdserverpb.Lease/LeaseGrant", func() unmarshaler { return &pb.LeaseGrantRequest{} }},
	"LeaseRevokeRequest":     {"/etcdserverpb.Lease/LeaseRevoke", func() unmarshaler { return &pb.LeaseRevokeRequest{} }},
	"LeaseKeepAliveRequest":  {"/etcdserverpb.Lease/LeaseKeepAlive", func() unmarshaler { return &pb.LeaseKeepAliveRequest{} }},
	"LeaseTimeToLiveRequest": {"/etcdserverpb.Lease/LeaseTimeToLive", func() unmarshaler { return &pb.LeaseTimeToLiveRequest{} }},
	"LeaseLeasesRequest":     {"/etcdserverpb.Lease/LeaseLeases", func() unmarshaler { return &pb.LeaseLeasesRequest{} }},
	"MemberAddRequest":       {"/etcdserverpb.Cluster/MemberAdd", func() unmarshaler { return &pb.MemberAddRequest{} }},
	"MemberRemoveRequest":    {"/etcdserverpb.Cluster/MemberRemove", func() unmarshaler { return &pb.MemberRemoveRequest{} }},
	"MemberUpdateRequest":    {"/etcdserverpb.Cluster/MemberUpdate", func() unmarshaler { return &pb.MemberUpdateRequest{} }},
	"MemberPromoteRequest":   {"/etcdserverpb.Cluster/MemberPromote", func() unmarshaler { return &pb.MemberPromoteRequest{} }},
	"AlarmRequest":           {"/etcdserverpb.Maintenance/Alarm", func() unmarshaler { return &pb.AlarmRequest{} }},
	"HashRequest":            {"/etcdserverpb.Maintenance/Hash", func() unmarshaler { return &pb.HashRequest{} }},
	"HashKVRequest":          {"/etcdserverpb.Maintenance/HashKV", func() unmarshaler { return &pb.HashKVRequest{} }},
	"SnapshotRequest":        {"/etcdserverpb.Maintenance/Snapshot", func() unmarshaler { return &pb.SnapshotRequest{} }},
	"MoveLeaderRequest":      {"/etcdserverpb.Maintenance/MoveLeader", func() unmarshaler { return &pb.MoveLeaderRequest{} }},
	"CampaignRequest":        {"/v3electionpb.Election/Campaign", func() unmarshaler { return &electionpb.CampaignRequest{} }},
	"ProclaimRequest":        {"/v3electionpb.Election/Proclaim", func() unmarshaler { return &electionpb.ProclaimRequest{} }},
	"LeaderRequest":          {"/v3electionpb.Election/Leader", func() unmarshaler { return &electionpb.LeaderRequest{} }},
	"ResignRequest":          {"/v3electionpb.Election/Resign", func() unmarshaler { return &electionpb.ResignRequest{} }},
	"LockRequest":            {"/v3lockpb.Lock/Lock", func() unmarshaler { return &lockpb.LockRequest{} }},
	"UnlockRequest":          {"/v3lockpb.Lock/Unlock", func() unmarshaler { return &lockpb.UnlockRequest{} }},
}

// rawCodec sends and receives message bodies as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "protodiff-raw" }

func parse(line string) (kind, []byte, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return kind{}, nil, fmt.Errorf("want \"<Message> <hex>\": %q", line)
	}
	k, ok := kinds[f[0]]
	if !ok {
		return kind{}, nil, fmt.Errorf("unknown message %q", f[0])
	}
	if f[1] == "-" {
		return k, nil, nil
	}
	b, err := hex.DecodeString(f[1])
	return k, b, err
}

// gogo's Marshal writes a negative value of a packed enum (the filters
// of a WatchCreateRequest, read as int32) as its low byte alone, bytes no
// decoder reads back. etcd never re-encodes a watch request; for these
// protodiff writes the filters itself, each as the ten-byte varint of
// its int32, as protobuf-c writes them, and the other fields with gogo.
func marshalWatch(m *pb.WatchRequest) ([]byte, bool, error) {
	cr := m.GetCreateRequest()
	if cr == nil {
		return nil, false, nil
	}
	negative := false
	for _, f := range cr.Filters {
		negative = negative || f < 0
	}
	if !negative {
		return nil, false, nil
	}
	head := *cr
	head.Filters, head.PrevKv, head.WatchId, head.Fragment = nil, false, 0, false
	tail := pb.WatchCreateRequest{PrevKv: cr.PrevKv, WatchId: cr.WatchId, Fragment: cr.Fragment}
	a, err := head.Marshal()
	if err != nil {
		return nil, true, err
	}
	b, err := tail.Marshal()
	if err != nil {
		return nil, true, err
	}
	var packed []byte
	for _, f := range cr.Filters {
		packed = appendVarint(packed, uint64(int64(f)))
	}
	inner := appendVarint(append(a, 5<<3|2), uint64(len(packed)))
	inner = append(append(inner, packed...), b...)
	return append(appendVarint([]byte{1<<3 | 2}, uint64(len(inner))), inner...), true, nil
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func decode(k kind, b []byte) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("PANIC %v", r)
		}
	}()
	m := k.msg()
	m.Reset()
	if err := m.Unmarshal(b); err != nil {
		return "ERR " + err.Error()
	}
	out2, err := m.Marshal()
	if w, ok := m.(*pb.WatchRequest); ok {
		if own, done, werr := marshalWatch(w); done {
			out2, err = own, werr
		}
	}
	if err != nil {
		return "MARSHAL " + err.Error()
	}
	return "OK " + hex.EncodeToString(out2)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "decode" && os.Args[1] != "grpc") {
		fmt.Fprintln(os.Stderr, "usage: protodiff decode | protodiff grpc -endpoint HOST:PORT  (cases on stdin)")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	endpoint := fs.String("endpoint", "127.0.0.1:2379", "member to send to (grpc mode)")
	fs.Parse(os.Args[2:])

	var conn *grpc.ClientConn
	if os.Args[1] == "grpc" {
		encoding.RegisterCodec(rawCodec{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		conn, err = grpc.DialContext(ctx, *endpoint, grpc.WithInsecure(), grpc.WithBlock(),
			grpc.WithDefaultCallOptions(grpc.CallContentSubtype(rawCodec{}.Name())))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "protodiff: dial:", err)
			os.Exit(1)
		}
		defer conn.Close()
	}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		k, b, err := parse(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, "protodiff:", err)
			os.Exit(2)
		}
		if conn == nil {
			fmt.Fprintln(out, decode(k, b))
			continue
		}
		var reply []byte
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = conn.Invoke(ctx, k.method, &b, &reply)
		cancel()
		st := status.Convert(err)
		fmt.Fprintf(out, "%d %s\n", st.Code(), st.Message())
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "protodiff:", err)
		os.Exit(2)
	}
}
