//! Shared by the fuzz targets: a scripted response run through a layer on a small runtime.
#![allow(dead_code)]

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use arbitrary::Arbitrary;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame};
use http_body_util::Full;

/// A response body made of arbitrary frames, an optional error after them, optional trailers.
#[derive(Clone, Debug, Arbitrary)]
pub struct FuzzBody {
    pub frames: Vec<Vec<u8>>,
    pub error_after: bool,
    pub trailers: bool,
}

impl FuzzBody {
    pub fn bytes(&self) -> Vec<u8> {
        self.frames.concat()
    }

    pub fn into_body(self) -> ScriptBody {
        let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
            self.frames.into_iter().map(|f| Ok(Frame::data(Bytes::from(f)))).collect();
        if self.error_after {
            frames.push(Err(std::io::Error::other("fuzz body error")));
        } else if self.trailers {
            let mut t = HeaderMap::new();
            t.insert("x-fuzz", "1".parse().unwrap());
            frames.push(Ok(Frame::trailers(t)));
        }
        frames.reverse();
        ScriptBody(frames)
    }
}

pub struct ScriptBody(Vec<Result<Frame<Bytes>, std::io::Error>>);

impl ScriptBody {
    /// The same body with `frame` after everything else.
    pub fn then_frame(mut self, frame: Result<Frame<Bytes>, std::io::Error>) -> Self {
        self.0.insert(0, frame);
        self
    }
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop())
    }
}

/// What the app read of a body: its bytes, whether an error came (and after how many bytes),
/// whether trailers came.
pub async fn read<B: Body<Data = Bytes> + Unpin>(mut body: B) -> (Vec<u8>, Option<usize>, bool) {
    let mut bytes = Vec::new();
    let mut trailers = false;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        match frame {
            Ok(f) => match f.into_data() {
                Ok(d) => bytes.extend_from_slice(&d),
                Err(_) => trailers = true,
            },
            Err(_) => return (bytes.clone(), Some(bytes.len()), trailers),
        }
    }
    (bytes, None, trailers)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
}

pub fn request(body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post("http://fuzz.invalid/mcp").body(Full::new(Bytes::from(body))).unwrap()
}

pub type Never = Infallible;
pub type FuzzResponse = Response<ScriptBody>;
