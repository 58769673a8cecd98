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
//	    sends each body to the request's KV, Maintenance or Cluster
//	    method and prints "<grpc status code> <status message>".
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

// The request types gatewayd serves, with the method each goes to.
var kinds = map[string]kind{
	"RangeRequest":       {"/etcdserverpb.KV/Range", func() unmarshaler { return &pb.RangeRequest{} }},
	"PutRequest":         {"/etcdserverpb.KV/Put", func() unmarshaler { return &pb.PutRequest{} }},
	"DeleteRangeRequest": {"/etcdserverpb.KV/DeleteRange", func() unmarshaler { return &pb.DeleteRangeRequest{} }},
	"TxnRequest":         {"/etcdserverpb.KV/Txn", func() unmarshaler { return &pb.TxnRequest{} }},
	"CompactionRequest":  {"/etcdserverpb.KV/Compact", func() unmarshaler { return &pb.CompactionRequest{} }},
	"StatusRequest":      {"/etcdserverpb.Maintenance/Status", func() unmarshaler { return &pb.StatusRequest{} }},
	"MemberListRequest":  {"/etcdserverpb.Cluster/MemberList", func() unmarshaler { return &pb.MemberListRequest{} }},
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
