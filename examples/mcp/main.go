// Command mcp serves VRAM Lab's answers to coding agents over the Model
// Context Protocol (stdio; the 2026-07-28 revision, and the initialize
// handshake of 2024-11-05 to 2025-11-25 for older clients), through the
// official Go SDK.
//
//	go run ./examples/mcp            # an agent starts it and speaks on stdin/stdout
//
// Its tools answer as the plan CLI does, from what the caller passes and
// nothing else: no file path, no hub id, no shell, no network.
//
//	estimate     a plan → plan -json's answer (the three measures, the peak and where, the releases modelled)
//	fit          a plan and a GPU → the verdict and the changes that make it fit, in the framework's flags
//	import       a trainer's or engine's config, or a command line → the answer and what was not read
//	explain_log  a vLLM, SGLang or llama.cpp startup log (and its plan, or the log's own args) → each figure beside the prediction
//	search       a training plan and N GPUs → the fastest layouts that fit, each as a plan and its launch flags
//	presets      the catalog's models
//	gpus         the catalog's GPUs
//
// A plan is a plan file's content (vram/answer/plan.schema.json); every
// answer's structured content follows vram/answer/report.schema.json or the
// tool's output schema.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the server's version as it introduces itself.
const Version = "1.0.0"

// maxMessage bounds one inbound JSON-RPC message: a log at its budget,
// escaped, with room for the rest.
const maxMessage = 40 << 20

func main() {
	s, err := newServer()
	if err != nil {
		log.Fatal(err)
	}
	t := &mcp.IOTransport{Reader: cutDeep(os.Stdin, maxMessage), Writer: nopCloser{os.Stdout}, MaxLineLength: maxMessage}
	if err := s.Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

type nopCloser struct{ *os.File }

func (nopCloser) Close() error { return nil }

// newServer is the server with every tool added.
func newServer() (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "vramlab", Title: "VRAM Lab", Version: Version}, &mcp.ServerOptions{
		Instructions: "VRAM Lab answers where GPU memory goes and whether a run fits: give a plan (a plan file's content) to estimate or fit, a trainer's or engine's config to import, an engine's startup log to explain_log, or a training plan and a number of GPUs to search for the layouts that fit. Models are catalog names (presets) or a config.json inline; GPUs are catalog names (gpus) or a capacity such as \"80GB\".",
	})
	ts, err := tools()
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		s.AddTool(t.tool(), t.handler())
	}
	return s, nil
}
