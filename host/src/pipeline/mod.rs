//! Pipeline routing: `<prefix>.<verb>` actions mapped to faculty commands. Pure
//! routing and gating — what a card or a lease is stays inside the faculties.

pub mod observations;
pub mod router;

pub use router::PipelineRouter;
