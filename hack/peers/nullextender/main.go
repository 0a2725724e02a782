// Command nullextender is the cheapest kube-scheduler extender there can be: it
// passes every node it is asked about and gives each the same score. It exists
// to be measured against. bench/extender.py runs the real kube-scheduler with
// it, with nodeqos-scheduler-extender and with no extender at all: what the
// null extender costs kube-scheduler is the price of the extender protocol
// itself (kube-scheduler's HTTP client and its JSON encoding and decoding), the
// floor under any extender's cost, and nodeqos's extender is reported against it.
//
// It speaks the protocol of k8s.io/kube-scheduler/extender/v1 with
// nodeCacheCapable set: ExtenderArgs carry NodeNames, and the answers name
// nodes. Go decodes field names case-insensitively, so the Pod the scheduler
// sends is skipped without being decoded into a struct.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
)

type extenderArgs struct {
	NodeNames *[]string
}

type filterResult struct {
	NodeNames   []string
	FailedNodes map[string]string
	Error       string
}

type hostPriority struct {
	Host  string
	Score int64
}

// names decodes the request's NodeNames; a request without them is refused,
// since this extender (like nodeqos's) is configured nodeCacheCapable.
func names(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return nil, false
	}
	var args extenderArgs
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, "bad ExtenderArgs: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	if args.NodeNames == nil {
		http.Error(w, "ExtenderArgs without NodeNames: configure nodeCacheCapable: true", http.StatusBadRequest)
		return nil, false
	}
	return *args.NodeNames, true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("writing the answer: %v", err)
	}
}

func main() {
	addr := flag.String("listen", "127.0.0.1:10262", "host:port to serve the filter and prioritize verbs on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/filter", func(w http.ResponseWriter, r *http.Request) {
		if nodes, ok := names(w, r); ok {
			reply(w, filterResult{NodeNames: nodes, FailedNodes: map[string]string{}})
		}
	})
	mux.HandleFunc("/prioritize", func(w http.ResponseWriter, r *http.Request) {
		if nodes, ok := names(w, r); ok {
			scores := make([]hostPriority, len(nodes))
			for i, node := range nodes {
				scores[i] = hostPriority{Host: node}
			}
			reply(w, scores)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]bool{"ready": true}) // what nodeqos's extender answers once synced
	})
	fmt.Fprintf(os.Stderr, "nullextender serving on %s\n", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
