//! HTTP/1.1 over a Unix socket for ureq: a [`Connector`] that opens the socket (whatever host
//! the URI names) and its [`Transport`], which honours ureq's per-call timeouts the way ureq's
//! own TCP transport does. ureq still does all of HTTP (framing, keep-alive, chunked bodies);
//! this file only moves bytes. A [`Resolver`] that resolves nothing keeps ureq from asking DNS.

use std::io::{self, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, ShutdownHandle, Transport,
};

/// Opens a connection to the socket at `path` for every request ureq sends.
#[derive(Debug, Clone)]
pub struct UnixConnector {
    pub path: PathBuf,
    /// How long a connect may take (a server whose backlog is full does not accept at once).
    pub connect_timeout: Duration,
}

impl<In: Transport> Connector<In> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let stream = connect(&self.path, self.connect_timeout).map_err(|error| {
            if error.kind() == io::ErrorKind::TimedOut {
                ureq::Error::Timeout(ureq::Timeout::Connect)
            } else {
                ureq::Error::Io(error)
            }
        })?;
        let config = details.config;
        let transport = UnixTransport {
            stream: Arc::new(Socket(stream)),
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
        };
        (details.register_shutdown)(Arc::downgrade(&transport.stream) as Weak<dyn ShutdownHandle>)?;
        Ok(Some(transport))
    }
}

/// A connect bounded by `timeout` (socket2's non-blocking connect and poll).
fn connect(path: &std::path::Path, timeout: Duration) -> io::Result<UnixStream> {
    let address = socket2::SockAddr::unix(path)?;
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.connect_timeout(&address, timeout.max(Duration::from_millis(1)))?;
    Ok(UnixStream::from(std::os::fd::OwnedFd::from(socket)))
}

/// The stream, shared (weakly) with ureq's shutdown handle.
#[derive(Debug)]
struct Socket(UnixStream);

impl ShutdownHandle for Socket {
    fn shutdown(&self) {
        // Already closed or shut down: nothing left to interrupt.
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

#[derive(Debug)]
pub struct UnixTransport {
    stream: Arc<Socket>,
    buffers: LazyBuffers,
}

/// `timeout` as a socket timeout: `None` never times out; a spent budget is an error now.
fn socket_timeout(timeout: NextTimeout) -> Result<Option<Duration>, ureq::Error> {
    if !timeout.after.is_not_happening() && timeout.after.is_zero() {
        return Err(ureq::Error::Timeout(timeout.reason));
    }
    Ok(timeout.not_zero().map(|t| *t))
}

fn timed_out(error: io::Error, timeout: NextTimeout) -> ureq::Error {
    match error.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ureq::Error::Timeout(timeout.reason),
        _ => ureq::Error::Io(error),
    }
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        let stream = &self.stream.0;
        stream.set_write_timeout(socket_timeout(timeout)?)?;
        let output = &self.buffers.output()[..amount];
        (&*stream)
            .write_all(output)
            .map_err(|e| timed_out(e, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        let stream = &self.stream.0;
        stream.set_read_timeout(socket_timeout(timeout)?)?;
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match (&*stream).read(input) {
                Ok(amount) => break amount,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(timed_out(error, timeout)),
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // A pooled connection is usable when nothing is waiting to be read (the server sent no
        // stray bytes) and it has not been closed (a read would answer 0).
        let stream = &self.stream.0;
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8];
        let open = matches!(
            (&*stream).read(&mut byte),
            Err(ref e) if e.kind() == io::ErrorKind::WouldBlock
        );
        stream.set_nonblocking(false).is_ok() && open
    }
}

/// Answers every name with one placeholder address the [`UnixConnector`] never uses.
#[derive(Debug, Default)]
pub struct NoResolver;

impl Resolver for NoResolver {
    fn resolve(
        &self,
        _uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addresses = self.empty();
        addresses.push(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        Ok(addresses)
    }
}
