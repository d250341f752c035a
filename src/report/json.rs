//! The JSON writer, which lives in [`crate::json`] so that `store` can use it too; its path
//! under `report` is kept for the renderers that name it so.

pub use crate::json::{Obj, base64};
