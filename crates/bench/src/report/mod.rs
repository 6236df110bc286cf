//! The outputs of a run: the text table, the JSON document, the SVG charts.

pub mod json;
pub mod svg;
pub mod table;

#[cfg(test)]
mod tests {
    use crate::layers::Layer;
    use crate::machine::Machine;
    use crate::options::{Direction, Options, Size};
    use crate::runner::{Report, Row};
    use crate::stats::{aggregate_rates, Measured};
    use espgw_esp::Suite;

    fn row(layer: Layer, valid: u64, invalid: u64) -> Row {
        let mut m = Measured::new();
        m.packets = valid + invalid;
        m.inner_bytes = 64 * m.packets;
        m.wire_bytes = 146 * m.packets;
        m.cycles = 300 * m.packets;
        // Fill and free add 100 cycles: 7.5 Mpps with I/O.
        m.io_cycles = 400 * m.packets;
        m.tally.valid = valid;
        m.tally.invalid = invalid;
        if invalid > 0 {
            m.tally.first_invalid = Some("wrong_spi");
        }
        let rates = aggregate_rates(std::slice::from_ref(&m), 3e9);
        Row {
            suite: Suite::Aes128Gcm16,
            size: Size::Fixed(64),
            direction: Direction::Encrypt,
            workers: 1,
            tunnels: 1,
            outer: crate::options::Outer::Esp4,
            inner: crate::options::Inner::Ipv4,
            replay_window: 1024,
            flows: 64,
            layer,
            rates,
            measured: m,
            ratio_to_ceiling: Some(1.0),
            efficiency: None,
        }
    }

    fn report(rows: Vec<Row>) -> Report {
        Report {
            machine: Machine {
                cpu_model: "Test CPU".into(),
                logical_cpus: 2,
                tsc_hz: 3_000_000_000,
                ..Machine::default()
            },
            options: Options {
                suites: vec![Suite::Aes128Gcm16],
                sizes: vec![Size::Fixed(64)],
                directions: vec![Direction::Encrypt],
                command: "espgw bench --suite aes128gcm16".into(),
                ..Options::default()
            },
            eal_args: vec![],
            rows,
            failures: vec![],
        }
    }

    #[test]
    fn table_and_json_carry_the_numbers_and_the_verdict() {
        let good = report(vec![
            row(Layer::Cipher, 3200, 0),
            row(Layer::Worker, 3200, 0),
        ]);
        let text = super::table::render(&good);
        // 300 cycles per packet at 3 GHz: 10 Mpps, 5.12 Gbit/s of 64-byte packets.
        assert!(text.contains("10.00"), "{text}");
        assert!(text.contains("5.12"), "{text}");
        assert!(text.contains("| ok"), "{text}");
        let json = super::json::render(&good);
        assert_eq!(json["all_valid"], true);
        assert_eq!(json["results"][1]["layer"], "worker");
        assert!((json["results"][0]["mpps"].as_f64().unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(json["command"], "espgw bench --suite aes128gcm16");
        // The I/O-inclusive rate and the flows, in the table and the JSON.
        assert!(text.contains("io Mp") && text.contains(" 7.50 |"), "{text}");
        assert!(text.contains("64 flows per worker"), "{text}");
        assert!((json["results"][1]["io_mpps"].as_f64().unwrap() - 7.5).abs() < 1e-9);
        assert_eq!(json["results"][1]["flows"], 64);
        assert_eq!(json["options"]["flows"], 64);

        let bad = report(vec![row(Layer::Cipher, 3190, 10)]);
        assert!(super::table::render(&bad).contains("BAD 10 (wrong_spi)"));
        assert_eq!(super::json::render(&bad)["all_valid"], false);
        assert_eq!(json["failed_cases"].as_array().map(Vec::len), Some(0));
    }

    /// A case that failed is in the table and the JSON, with its error,
    /// beside the rows of the cases that ran, and the run is not valid.
    #[test]
    fn a_failed_case_is_reported_beside_the_others() {
        let mut rep = report(vec![row(Layer::Cipher, 3200, 0)]);
        rep.failures.push(crate::runner::CaseFailure {
            suite: Suite::Aes128Gcm16,
            size: Size::Fixed(1420),
            direction: Direction::Decrypt,
            workers: 2,
            error: "fan-out: 3 packets and 0 handed-off groups still out after 2 s".into(),
        });
        let text = super::table::render(&rep);
        assert!(
            text.contains("1420 decrypt   2 FAILED: fan-out: 3 packets"),
            "{text}"
        );
        assert!(
            text.contains("| ok"),
            "the case that ran keeps its row: {text}"
        );
        let json = super::json::render(&rep);
        assert_eq!(json["all_valid"], false);
        assert_eq!(json["results"].as_array().map(Vec::len), Some(1));
        let failed = &json["failed_cases"][0];
        assert_eq!(failed["size"], "1420");
        assert_eq!(failed["direction"], "decrypt");
        assert_eq!(failed["workers"], 2);
        assert!(failed["error"].as_str().unwrap().contains("after 2 s"));
    }
}
