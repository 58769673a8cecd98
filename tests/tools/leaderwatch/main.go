// leaderwatch: one Watch stream on a key through etcd's Go client,
// with or without clientv3.WithRequireLeader (the gRPC metadata
// hasleader=true), that reports how it ends. It prints "created" once
// the server created the watch, "event KEY" per event, and, when the
// stream ends, "end code=CODE desc=TEXT after=SECONDS" (SECONDS since
// the watch was created, or since the start if it never was); if the
// stream is still open after -for, "open". Exits 0 either way, 1 when
// it cannot connect.
//
//	leaderwatch -endpoint HOST:PORT [-key K] [-require-leader] [-for D]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/clientv3"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"google.golang.org/grpc/status"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "client URL host:port")
	key := flag.String("key", "noleader", "key to watch")
	requireLeader := flag.Bool("require-leader", false, "mark the stream with clientv3.WithRequireLeader")
	wait := flag.Duration("for", 30*time.Second, "how long to wait for the stream to end")
	flag.Parse()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 3 * time.Second})
	if err != nil {
		fmt.Println("connect:", err)
		os.Exit(1)
	}
	defer cli.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	if *requireLeader {
		ctx = clientv3.WithRequireLeader(ctx)
	}
	since := time.Now()
	ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		report(err, since)
		return
	}
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte(*key)}}}
	if err := ws.Send(req); err != nil {
		report(err, since)
		return
	}
	for {
		resp, err := ws.Recv()
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				fmt.Println("open")
				return
			}
			report(err, since)
			return
		}
		if resp.Created {
			fmt.Println("created")
			since = time.Now()
		}
		for _, ev := range resp.Events {
			fmt.Println("event", string(ev.Kv.Key))
		}
	}
}

func report(err error, since time.Time) {
	st, _ := status.FromError(err)
	fmt.Printf("end code=%s desc=%s after=%.2f\n", st.Code(), st.Message(), time.Since(since).Seconds())
}
