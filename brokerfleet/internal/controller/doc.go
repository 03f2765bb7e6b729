// Package controller is the cluster's controller: whichever broker holds
// the controller lease judges which brokers are live, fences the ones that
// froze, elects leaders from the ISR, moves replicas off brokers dead too
// long or draining, evens out replica placement and preferred leadership,
// and assigns the group coordinator shards. There is no controller
// cluster: every change is a compare-and-set on a metastore record, so two
// controllers (an old one past its deadline and a new one) cannot both
// apply a change made from the same read.
//
// It depends on the metastore and a clock, not on the broker. Its
// decisions are pure functions over partition states and broker views
// (liveness.go, placement.go, leaders.go, shards.go), table-tested without
// sockets or sleeps; controller.go is the loop that reads the metastore,
// asks them, and writes what they decide.
package controller
