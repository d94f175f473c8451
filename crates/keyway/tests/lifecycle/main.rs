//! A pool's life: building it (bad settings are typed errors), its threads (core, auxiliary,
//! reserved), room and backpressure, what it reports, shutdown and shutdown_now, and the one-way
//! import order of the library's layers, and doc examples written once.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod backpressure;
mod config;
mod doc_examples;
mod elastic;
mod errors;
mod layers;
mod observability;
mod operating;
mod reserved;
mod shutdown;
mod shutdown_async;
mod shutdown_inside_tasks;
mod threads;
mod wait_idle;
