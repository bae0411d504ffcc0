//! A run's timeline predicted by a model, in the form a kernel trace takes
//! downstream: what the model hands the campaign in place of a capture.
//! It lives here, with the trace's types it is made of, so that the
//! launcher's [`crate::launch::Outcome`] names no type of the model
//! (`sim` fills it, `launch` and the campaign only carry it).

use super::Capture;
use super::derive::Derived;
use super::summary::WorkWindow;

/// A simulated run's timeline as a capture (no events) and what the store
/// derives from one.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub capture: Capture,
    pub derived: Derived,
    /// Each worker's own window (its start to its end after the release)
    /// on the model's clock, as a traced run's are on the trace's.
    pub windows: Vec<WorkWindow>,
}
