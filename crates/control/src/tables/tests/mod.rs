//! Tests across the table modules: the compiled SPD against the linear
//! reference model, the shadow check against the same model, and the
//! snapshot publishing under concurrent readers.

mod rcu_stress;
mod spd_model;
