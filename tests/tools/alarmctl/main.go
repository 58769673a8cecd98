// alarmctl sends a Maintenance.Alarm request as a member's own checks
// send one (etcdctl can only list and disarm alarms):
//
//	alarmctl -endpoint HOST:PORT -action activate|deactivate|get -alarm CORRUPT|NOSPACE|NONE -member ID
//
// It prints the alarms of the response, one "memberID:N alarm:TYPE" line
// each (etcdctl alarm list's format), or the error, and exits 1 on one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "client endpoint")
	action := flag.String("action", "get", "activate, deactivate or get")
	alarm := flag.String("alarm", "NONE", "CORRUPT, NOSPACE or NONE")
	member := flag.Uint64("member", 0, "the alarm's member id")
	flag.Parse()

	acts := map[string]pb.AlarmRequest_AlarmAction{"get": pb.AlarmRequest_GET,
		"activate": pb.AlarmRequest_ACTIVATE, "deactivate": pb.AlarmRequest_DEACTIVATE}
	act, ok := acts[*action]
	typ, ok2 := pb.AlarmType_value[strings.ToUpper(*alarm)]
	if !ok || !ok2 {
		fmt.Fprintln(os.Stderr, "alarmctl: bad -action or -alarm")
		os.Exit(2)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 3 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "alarmctl:", err)
		os.Exit(1)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx,
		&pb.AlarmRequest{Action: act, MemberID: *member, Alarm: pb.AlarmType(typ)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "alarmctl:", err)
		os.Exit(1)
	}
	for _, a := range resp.Alarms {
		fmt.Printf("memberID:%d alarm:%s\n", a.MemberID, a.Alarm)
	}
}
