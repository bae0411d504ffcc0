pub mod bootstrap;
pub mod dist;
pub mod hypothesis;
pub mod outliers;
pub mod summary;
