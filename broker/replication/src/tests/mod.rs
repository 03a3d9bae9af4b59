//! Scenario tests across modules: the leader state machine driven by tables
//! of steps (`leader`), and a simulated three-node cluster with a
//! controller and a step-by-step network (`cluster`).

mod cluster;
mod leader;
