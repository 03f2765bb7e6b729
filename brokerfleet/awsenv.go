package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// ecsTask is what the ECS task metadata endpoint (v4) says about the task
// this process runs in: its availability zone and its network addresses.
type ecsTask struct {
	AvailabilityZone string `json:"AvailabilityZone"`
	Containers       []struct {
		Networks []struct {
			IPv4Addresses  []string `json:"IPv4Addresses"`
			PrivateDNSName string   `json:"PrivateDNSName"` // -advertise-private-dns
		} `json:"Networks"`
	} `json:"Containers"`
}

// errNotOnECS is returned by readECSTask outside an ECS task.
var errNotOnECS = errors.New("not in an ECS task (ECS_CONTAINER_METADATA_URI_V4 is unset)")

// readECSTask reads the task metadata from ECS_CONTAINER_METADATA_URI_V4.
func readECSTask(ctx context.Context) (ecsTask, error) {
	base := os.Getenv("ECS_CONTAINER_METADATA_URI_V4")
	if base == "" {
		return ecsTask{}, errNotOnECS
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/task", nil)
	if err != nil {
		return ecsTask{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ecsTask{}, fmt.Errorf("ECS task metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ecsTask{}, fmt.Errorf("ECS task metadata: %s", resp.Status)
	}
	var t ecsTask
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return ecsTask{}, fmt.Errorf("ECS task metadata: %w", err)
	}
	return t, nil
}

// autoRack resolves -rack auto: the availability zone of the ECS task.
func autoRack(ctx context.Context) (string, error) {
	t, err := readECSTask(ctx)
	if err == nil && t.AvailabilityZone == "" {
		err = errors.New("ECS task metadata has no AvailabilityZone")
	}
	if err != nil {
		return "", usageError{fmt.Errorf("flag -rack auto: %v; set -rack to the availability zone", err)}
	}
	return t.AvailabilityZone, nil
}

// advertiseFor returns the address to advertise for a listener on addr
// when -advertise is not set: addr itself, unless its host is unspecified
// (0.0.0.0, ::), where clients need a real address: the ECS task's IPv4
// address, else the first non-loopback IPv4 address of an interface that
// is up.
func advertiseFor(ctx context.Context, addr net.Addr) (string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String(), nil
	}
	port := fmt.Sprint(tcp.Port)
	if t, err := readECSTask(ctx); err == nil {
		for _, c := range t.Containers {
			for _, n := range c.Networks {
				for _, ip := range n.IPv4Addresses {
					return net.JoinHostPort(ip, port), nil
				}
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return net.JoinHostPort(ipn.IP.String(), port), nil
			}
		}
	}
	return "", usageError{fmt.Errorf("flag -listen %s: no address to advertise (no ECS task metadata, no non-loopback IPv4 interface); set -advertise", addr)}
}
