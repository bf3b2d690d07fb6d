// Command referrers-registry serves go-containerregistry's in-memory registry (the one behind
// `crane registry serve`) with its referrers API switched on, which the crane command does not
// offer. Used by ReferrersApiIT as an upstream that implements OCI Distribution 1.1 referrers.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "address to listen on (loopback)")
	flag.Parse()
	server := &http.Server{
		Addr:              *address,
		Handler:           registry.New(registry.WithReferrersSupport(true)),
		ReadHeaderTimeout: 5 * time.Second,
	}
	log.Printf("serving on %s", *address)
	log.Fatal(server.ListenAndServe())
}
