package main

// brokerfleet brokers: list the brokers of a cluster, and drain one (mark
// it so the controller moves every replica and leadership off it) before
// it is stopped.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

// drainingConfig is the broker config that marks a broker as draining:
// while it is "true" the controller moves the broker's replicas and
// leadership to other brokers in throttled reassignments.
const drainingConfig = "strata.broker.draining"

const brokersHelp = `usage: brokerfleet brokers <verb> [flags]

Lists and drains brokers through the Kafka admin API of any broker in the
cluster.

verbs:
  list                 brokers with their address, rack, and the partitions
                       they lead and hold replicas of; * marks the controller
  drain ID             mark broker ID as draining (strata.broker.draining=true):
                       the controller moves its replicas and leadership to
                       other brokers; by default waits until it holds none
  undrain ID           stop draining broker ID (strata.broker.draining=false)

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet brokers <verb> -help' for its flags.
`

const (
	brokersListHelp = `usage: brokerfleet brokers list [flags]

Lists the brokers of the cluster. LEADERS counts the partitions a broker
leads, REPLICAS those it holds a replica of (leaders included).

flags:
`
	brokersDrainHelp = `usage: brokerfleet brokers drain [flags] ID

Marks broker ID as draining by setting its broker config
strata.broker.draining=true (IncrementalAlterConfigs). The controller then
moves every replica and leadership off the broker in throttled
reassignments. With -wait (the default) the command polls the cluster's
metadata and shows the replicas left on the broker until it holds none and
leads nothing; the broker may then be stopped.

flags:
`
	brokersUndrainHelp = `usage: brokerfleet brokers undrain [flags] ID

Stops draining broker ID (strata.broker.draining=false). Replicas already
moved stay where they are; new partitions may be placed on the broker again.

flags:
`
)

func runBrokers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "brokers", brokersHelp, []cli.Verb{
		{Name: "list", Run: brokersList},
		{Name: "drain", Run: brokersDrain},
		{Name: "undrain", Run: brokersUndrain},
	}, args, stdout, stderr)
}

// ---- list ----

type listedBrokerJSON struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
	Draining   bool   `json:"draining"` // strata.broker.draining is true
	Leaders    int    `json:"leaders"`
	Replicas   int    `json:"replicas"`
}

type brokersJSON struct {
	Cluster    string             `json:"cluster"`
	Controller int32              `json:"controller"` // -1: unknown
	Brokers    []listedBrokerJSON `json:"brokers"`
}

// brokerLoad counts the partitions broker id leads and holds replicas of.
func brokerLoad(md kadm.Metadata, id int32) (leaders, replicas int) {
	md.Topics.EachPartition(func(p kadm.PartitionDetail) {
		if p.Err != nil && len(p.Replicas) == 0 {
			return
		}
		if p.Leader == id {
			leaders++
		}
		for _, r := range p.Replicas {
			if r == id {
				replicas++
				break
			}
		}
	})
	return leaders, replicas
}

func brokersList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("brokers list", brokersListHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		md, err := adm.Metadata(ctx)
		if err != nil {
			return a.Fail("describe cluster", err)
		}
		doc := brokersJSON{Cluster: md.Cluster, Controller: md.Controller, Brokers: []listedBrokerJSON{}}
		draining, derr := drainingBrokers(ctx, adm, md)
		for _, b := range md.Brokers {
			lb := listedBrokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.Controller, Draining: draining[b.NodeID]}
			if b.Rack != nil {
				lb.Rack = *b.Rack
			}
			lb.Leaders, lb.Replicas = brokerLoad(md, b.NodeID)
			doc.Brokers = append(doc.Brokers, lb)
		}
		if derr != nil {
			defer fmt.Fprintf(stderr, "brokerfleet brokers: which brokers are draining is unknown: %v\n", derr)
		}
		return a.Print(stdout, doc, func() error { return printBrokers(stdout, doc) })
	})
}

func printBrokers(w io.Writer, doc brokersJSON) error {
	tw := cli.NewTable(w)
	tw.Row("ID", "ADDRESS", "RACK", "CONTROLLER", "LEADERS", "REPLICAS", "STATUS")
	for _, b := range doc.Brokers {
		ctl, status := "", "-"
		if b.Controller {
			ctl = "*"
		}
		if b.Draining {
			status = "draining"
		}
		tw.Row(strconv.Itoa(int(b.ID)), net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), cli.Dash(b.Rack), ctl, strconv.Itoa(b.Leaders), strconv.Itoa(b.Replicas), status)
	}
	return tw.Flush()
}

// drainingBrokers reports which brokers have strata.broker.draining=true
// (a cluster that does not know the config has none).
func drainingBrokers(ctx context.Context, adm *kadm.Client, md kadm.Metadata) (map[int32]bool, error) {
	ids := make([]int32, len(md.Brokers))
	for i, b := range md.Brokers {
		ids[i] = b.NodeID
	}
	out := map[int32]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, rc := range rcs {
		id, perr := strconv.ParseInt(rc.Name, 10, 32)
		switch {
		case perr != nil:
			continue
		case rc.Err != nil:
			errs = append(errs, fmt.Errorf("broker %s: %s", rc.Name, errWithMessage(rc.Err, rc.ErrMessage)))
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == drainingConfig && c.MaybeValue() == "true" {
				out[int32(id)] = true
			}
		}
	}
	return out, errors.Join(errs...)
}

// ---- drain, undrain ----

type drainJSON struct {
	Broker   int32 `json:"broker"`
	Draining bool  `json:"draining"`
	Waited   bool  `json:"waited"`
	// ReplicasLeft and LeadersLeft are what the broker holds when the
	// command ended.
	ReplicasLeft int  `json:"replicasLeft"`
	LeadersLeft  int  `json:"leadersLeft"`
	Drained      bool `json:"drained"` // no replicas, no leadership: it may be stopped
}

// parseBrokerID parses the ID argument of drain and undrain.
func parseBrokerID(pos []string) (int32, error) {
	switch len(pos) {
	case 0:
		return 0, cli.Usagef("name the broker (argument ID)")
	case 1:
	default:
		return 0, cli.Usagef("one broker at a time, got %q (argument ID)", pos)
	}
	v, err := strconv.ParseInt(pos[0], 10, 32)
	if err != nil || v < 0 {
		return 0, cli.Usagef("%q is not a broker id (argument ID)", pos[0])
	}
	return int32(v), nil
}

// brokerIDs lists the ids of md's brokers, for messages.
func brokerIDs(md kadm.Metadata) string {
	ids := make([]int32, len(md.Brokers))
	for i, b := range md.Brokers {
		ids[i] = b.NodeID
	}
	return cli.Int32s(ids)
}

func brokersUndrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("brokers undrain", brokersUndrainHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	id, err := parseBrokerID(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		doc, err := setDraining(ctx, adm, a, id, false)
		if err != nil {
			return err
		}
		return a.Print(stdout, doc, func() error {
			fmt.Fprintf(stdout, "broker %d: no longer draining\n", id)
			return nil
		})
	})
}

func brokersDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("brokers drain", brokersDrainHelp)
	wait := a.Flags.Bool("wait", true, "wait until the broker holds no replicas and leads no partitions; -timeout then defaults to 1h")
	interval := a.Flags.Duration("interval", time.Second, "how often -wait polls the cluster's metadata")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	// Draining takes as long as moving the broker's data.
	a.WaitTimeout(*wait)
	id, err := parseBrokerID(pos)
	if err != nil {
		return err
	}
	if err := cli.Positive("interval", *interval); err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		doc, err := setDraining(ctx, adm, a, id, true)
		if err != nil {
			return err
		}
		if !*wait {
			return a.Print(stdout, doc, func() error {
				fmt.Fprintf(stdout, "broker %d: draining; the controller is moving its %d replica(s) and %d leadership(s) off it ('brokerfleet brokers list' shows what is left)\n", id, doc.ReplicasLeft, doc.LeadersLeft)
				return nil
			})
		}
		// Progress goes to stdout, or to stderr when stdout carries JSON.
		pw := stdout
		if a.JSON {
			pw = stderr
		}
		if err := waitDrained(ctx, adm, a, &doc, *interval, pw, stderr); err != nil {
			return err
		}
		return a.Print(stdout, doc, func() error {
			fmt.Fprintf(stdout, "broker %d holds no replicas and leads no partitions; it may be stopped\n", id)
			return nil
		})
	})
}

// setDraining sets strata.broker.draining of broker id, which must exist,
// and returns what the broker holds.
func setDraining(ctx context.Context, adm *kadm.Client, a *cli.Admin, id int32, drain bool) (drainJSON, error) {
	doc := drainJSON{Broker: id, Draining: drain}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return doc, a.Fail("describe cluster", err)
	}
	known := false
	for _, b := range md.Brokers {
		known = known || b.NodeID == id
	}
	if !known {
		return doc, fmt.Errorf("unknown broker %d (argument ID): the cluster has brokers %s", id, brokerIDs(md))
	}

	value, what := "true", "mark broker "+strconv.Itoa(int(id))+" as draining"
	if !drain {
		value, what = "false", "stop draining broker "+strconv.Itoa(int(id))
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: drainingConfig, Value: kadm.StringPtr(value)}}, id)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = rs.On(strconv.Itoa(int(id)), nil); err != nil {
			err = errors.New("not in the response")
		} else if r.Err != nil {
			err = fmt.Errorf("%s (setting broker config %s=%s; does the cluster support draining?)", errWithMessage(r.Err, r.ErrMessage), drainingConfig, value)
		}
	}
	if err != nil {
		return doc, a.Fail(what, err)
	}
	doc.LeadersLeft, doc.ReplicasLeft = brokerLoad(md, id)
	return doc, nil
}

// waitDrained polls the cluster's metadata every interval until the
// broker of doc holds no replicas and leads nothing, showing progress on
// w.
func waitDrained(ctx context.Context, adm *kadm.Client, a *cli.Admin, doc *drainJSON, interval time.Duration, w, stderr io.Writer) error {
	id := doc.Broker
	bar := cli.NewProgress(w)
	total := doc.ReplicasLeft
	show := func() {
		total = max(total, doc.ReplicasLeft)
		bar.Update(total-doc.ReplicasLeft, total, fmt.Sprintf("moved; replicas left on broker %d: %d → %d, leading %d", id, total, doc.ReplicasLeft, doc.LeadersLeft))
	}
	show()
	doc.Waited = true
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for doc.ReplicasLeft > 0 || doc.LeadersLeft > 0 {
		select {
		case <-ctx.Done():
			bar.Finish()
			return a.Fail(fmt.Sprintf("wait for broker %d to drain (%d replica(s), %d leadership(s) left; it stays draining, 'brokerfleet brokers undrain %d' stops that)", id, doc.ReplicasLeft, doc.LeadersLeft, id), ctx.Err())
		case <-tick.C:
		}
		md, err := adm.Metadata(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue // reported above
			}
			bar.Finish()
			fmt.Fprintf(stderr, "describe cluster: %v (retrying)\n", err)
			continue
		}
		doc.LeadersLeft, doc.ReplicasLeft = brokerLoad(md, id)
		show()
	}
	bar.Finish()
	doc.Drained = true
	return nil
}
