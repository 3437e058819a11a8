//! End-to-end tests: the real `butler` binary on an ephemeral port against a temp
//! instance, driven over HTTP and the CLI like a user would.

mod agents;
mod capabilities;
mod card_index;
mod catalog;
mod cli;
mod collector;
mod conformance;
mod console;
mod crash;
mod docs;
mod examples;
mod exhaustion;
mod faculty;
mod gate;
mod knowledge_loop;
mod layers;
mod lifecycle;
mod mcp;
mod mcp_duplex;
mod mcp_faithful;
mod mcp_inspector;
mod mcp_profiles;
mod mcp_quarantine;
mod mcp_reference;
mod mcp_resume;
mod mcp_stateless;
mod openapi;
mod pipeline;
mod private_state;
mod stores;
mod supervise;
mod torture;
mod trust;
mod ui_apps;
mod util;
