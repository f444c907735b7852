//! A meter of the tests' own, through OpenTelemetry's API alone (no SDK): what the crate's
//! instruments record, read back as an exporter would be handed it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Histogram, HistogramBuilder, InstrumentProvider,
    Meter, ObservableCounter, ObservableGauge, SyncInstrument,
};

/// A data point's key: the instrument, its unit, its attributes as sorted `key=value`.
pub(crate) type Key = (String, String, Vec<String>);

/// Each histogram measurement: its key and the histogram's bucket boundaries.
type Measurements = Arc<Mutex<Vec<(Key, Option<Vec<f64>>)>>>;
/// An observable instrument, asked for its data points as a reader asks.
type Observed = Box<dyn Fn() -> Vec<(Key, String)> + Send + Sync>;

fn key(name: &str, unit: Option<&str>, attributes: &[KeyValue]) -> Key {
    let mut list: Vec<String> = attributes
        .iter()
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    list.sort();
    (name.to_owned(), unit.unwrap_or_default().to_owned(), list)
}

/// A meter of the test's own, through OpenTelemetry's API alone (no SDK): it keeps each
/// histogram's measurements and each observable instrument's callback, and [`Self::read`]
/// gives what an exporter would be handed.
#[derive(Clone, Default)]
pub(crate) struct TestMeter {
    histograms: Measurements,
    observed: Arc<Mutex<Vec<Observed>>>,
}

struct Recorder {
    key: (String, Option<String>, Option<Vec<f64>>),
    histograms: Measurements,
}

impl SyncInstrument<f64> for Recorder {
    fn measure(&self, _value: f64, attributes: &[KeyValue]) {
        let (name, unit, bounds) = &self.key;
        self.histograms
            .lock()
            .unwrap()
            .push((key(name, unit.as_deref(), attributes), bounds.clone()));
    }
}

/// What one observable instrument's callbacks observe, as text.
struct Observations<'a> {
    name: &'a str,
    unit: Option<&'a str>,
    points: Mutex<Vec<(Key, String)>>,
}

impl<T: ToString> AsyncInstrument<T> for Observations<'_> {
    fn observe(&self, value: T, attributes: &[KeyValue]) {
        let point = (key(self.name, self.unit, attributes), value.to_string());
        self.points.lock().unwrap().push(point);
    }
}

impl TestMeter {
    pub(crate) fn meter(&self) -> Meter {
        Meter::new(Arc::new(self.clone()))
    }

    fn observe<I, T: ToString + 'static>(&self, builder: AsyncInstrumentBuilder<'_, I, T>) {
        let (name, unit) = (
            builder.name.to_string(),
            builder.unit.map(|u| u.to_string()),
        );
        let callbacks = builder.callbacks;
        self.observed.lock().unwrap().push(Box::new(move || {
            let observations = Observations {
                name: &name,
                unit: unit.as_deref(),
                points: Mutex::new(Vec::new()),
            };
            for callback in &callbacks {
                callback(&observations);
            }
            observations.points.into_inner().unwrap()
        }));
    }

    /// Each data point as an exporter would get it now: (instrument, unit, attributes) →
    /// its value (an observable counter or gauge), or its count and bounds (a histogram).
    pub(crate) fn read(&self) -> BTreeMap<Key, String> {
        let mut points: BTreeMap<Key, String> = BTreeMap::new();
        for observed in self.observed.lock().unwrap().iter() {
            points.extend(observed());
        }
        let mut counts: BTreeMap<Key, (usize, Vec<f64>)> = BTreeMap::new();
        for (key, bounds) in self.histograms.lock().unwrap().iter() {
            let entry = counts
                .entry(key.clone())
                .or_insert((0, bounds.clone().unwrap_or_default()));
            entry.0 += 1;
        }
        points.extend(
            counts
                .into_iter()
                .map(|(key, (count, bounds))| (key, format!("count {count} bounds {bounds:?}"))),
        );
        points
    }
}

/// The observable instruments the budget registers: each keeps its callbacks in the meter.
macro_rules! observed {
    ($($method:ident: $instrument:ident<$t:ty>,)*) => {$(
        fn $method(
            &self,
            builder: AsyncInstrumentBuilder<'_, $instrument<$t>, $t>,
        ) -> $instrument<$t> {
            self.observe(builder);
            $instrument::new()
        }
    )*};
}

impl InstrumentProvider for TestMeter {
    fn f64_histogram(&self, builder: HistogramBuilder<'_, Histogram<f64>>) -> Histogram<f64> {
        Histogram::new(Arc::new(Recorder {
            key: (
                builder.name.to_string(),
                builder.unit.map(|u| u.to_string()),
                builder.boundaries,
            ),
            histograms: self.histograms.clone(),
        }))
    }

    observed! {
        u64_observable_counter: ObservableCounter<u64>,
        f64_observable_counter: ObservableCounter<f64>,
        u64_observable_gauge: ObservableGauge<u64>,
    }
}

/// The key of a data point: `attributes` as `key=value`, in any order.
pub(crate) fn point(name: &str, unit: &str, attributes: &[&str]) -> (String, String, Vec<String>) {
    let mut list: Vec<String> = attributes.iter().map(|a| (*a).to_owned()).collect();
    list.sort();
    (name.to_owned(), unit.to_owned(), list)
}
