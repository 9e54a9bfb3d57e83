// Command go_reader reads session files the way Go ChatCLI reads them: the types below are the
// declarations of its `models` package (v1.188: SessionData, Message, MessageMeta, ToolCall,
// ContentBlock, ImageContent) and the order of its SessionManager.LoadSessionV2 (the v2 document
// first, then a bare array of messages). Go's encoding/json refuses a whole file when one field
// has another type, so a file this program reads is a file Go ChatCLI reads.
//
// Usage: go_reader FILE...   prints "ok FILE" or "error FILE: <Go's error>" per file, exits 1
// when any file failed.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type MessageMeta struct {
	IsSummary        bool   `json:"is_summary,omitempty"`
	SummaryOf        int    `json:"summary_of,omitempty"`
	Mode             string `json:"mode,omitempty"`
	PreserveVerbatim bool   `json:"preserve_verbatim,omitempty"`
	AgentFeedback    bool   `json:"agent_feedback,omitempty"`
	SkillNames       string `json:"skill_names,omitempty"`
	SkillCollapsed   bool   `json:"skill_collapsed,omitempty"`
}

type ToolCall struct {
	ID        string                 `json:"id"`
	Type      string                 `json:"type"`
	Name      string                 `json:"name"`
	Arguments map[string]interface{} `json:"arguments"`
	Raw       string                 `json:"raw,omitempty"`
}

type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

type ContentBlock struct {
	Type         string        `json:"type"`
	Text         string        `json:"text,omitempty"`
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

type ImageContent struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileName  string `json:"file_name,omitempty"`
}

type Message struct {
	Role        string         `json:"role"`
	Content     string         `json:"content"`
	Meta        *MessageMeta   `json:"meta,omitempty"`
	ToolCalls   []ToolCall     `json:"tool_calls,omitempty"`
	ToolCallID  string         `json:"tool_call_id,omitempty"`
	SystemParts []ContentBlock `json:"system_parts,omitempty"`
	Images      []ImageContent `json:"images,omitempty"`
	IsError     bool           `json:"is_error,omitempty"`
	ErrorCode   string         `json:"error_code,omitempty"`
}

type SessionData struct {
	Version      int       `json:"version"`
	Title        string    `json:"title,omitempty"`
	ChatHistory  []Message `json:"chat_history"`
	AgentHistory []Message `json:"agent_history,omitempty"`
	CoderHistory []Message `json:"coder_history,omitempty"`
	SharedMemory []Message `json:"shared_memory,omitempty"`
}

func load(data []byte) (int, error) {
	var sd SessionData
	err := json.Unmarshal(data, &sd)
	if err == nil && sd.Version >= 2 {
		return len(sd.ChatHistory), nil
	}
	var legacy []Message
	if legacyErr := json.Unmarshal(data, &legacy); legacyErr != nil {
		if err != nil {
			return 0, err // the v2 reading's error says more than the legacy one
		}
		return 0, legacyErr
	}
	return len(legacy), nil
}

func main() {
	failed := false
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err == nil {
			var count int
			count, err = load(data)
			if err == nil {
				fmt.Printf("ok %s %d\n", path, count)
				continue
			}
		}
		failed = true
		fmt.Printf("error %s: %v\n", path, err)
	}
	if failed {
		os.Exit(1)
	}
}
