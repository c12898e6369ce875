# A stand-in for just enough of Homebrew's formula DSL to load the
# release's formula and say, as JSON, what it declares for one platform:
#
#   cd UNPACKED_ARCHIVE && ruby formula_dsl.rb FORMULA macos|linux arm|intel RUN_TEST
#
# Run where Homebrew runs an install: in the platform's release archive,
# unpacked, inside its one top directory. It runs the formula's install,
# recording what it installs and failing on a file the archive does not
# hold, reads its service block, and, when RUN_TEST is true (this
# machine's platform), runs its test block with the archive's own
# directory as bin: the binary as the archive holds it.
require "json"
require "pathname"

PLATFORM_OS, PLATFORM_CPU = ARGV[1], ARGV[2]
RUN_TEST = ARGV[3] == "true"
STAGE = Pathname(Dir.pwd)

module OS
  def self.mac? = PLATFORM_OS == "macos"
  def self.linux? = PLATFORM_OS == "linux"
end

module Hardware
  module CPU
    def self.arm? = PLATFORM_CPU == "arm"
    def self.intel? = PLATFORM_CPU == "intel"
  end
end

class Formula
  INFO = { "urls" => [], "sha256s" => [] }

  class << self
    def inherited(k) = INFO[:class] = k
    def desc(s) = INFO["desc"] = s
    def homepage(s) = INFO["homepage"] = s
    def version(s = nil) = s.nil? ? INFO["version"] : INFO["version"] = s
    def license(s) = INFO["license"] = s
    def url(s) = INFO["urls"] << s
    def sha256(s) = INFO["sha256s"] << s
    def on_macos = (yield if OS.mac?)
    def on_linux = (yield if OS.linux?)
    def on_arm = (yield if Hardware::CPU.arm?)
    def on_intel = (yield if Hardware::CPU.intel?)
    def service(&blk) = INFO[:service] = blk
    def test(&blk) = INFO[:test] = blk
  end

  # What install does, recorded as [install, DIR, {SOURCE => NAME}]; a
  # source missing from the unpacked archive fails, as in Homebrew.
  class InstallDir
    def initialize(path, log) = (@path, @log = Pathname(path), log)
    def /(other) = @path / other
    def mkpath = @log << ["mkpath", @path.to_s]
    def to_s = @path.to_s

    def install(*specs)
      files = {}
      specs.flatten.each do |spec|
        pairs = spec.is_a?(Hash) ? spec : { spec => File.basename(spec.to_s) }
        pairs.each do |src, dst|
          raise "install: #{src} is not in the archive (#{STAGE})" unless File.exist?(src.to_s)
          files[src.to_s] = dst.to_s
        end
      end
      raise "install of nothing into #{@path}" if files.empty?
      @log << ["install", @path.to_s, files]
    end
  end

  def initialize = @log = []
  def log = @log
  def version = self.class.version
  def bin = (@phase == :test ? STAGE : InstallDir.new("/prefix/bin", @log))
  def man1 = InstallDir.new("/prefix/share/man/man1", @log)
  def bash_completion = InstallDir.new("/prefix/etc/bash_completion.d", @log)
  def zsh_completion = InstallDir.new("/prefix/share/zsh/site-functions", @log)
  def fish_completion = InstallDir.new("/prefix/share/fish/vendor_completions.d", @log)
  def opt_bin = Pathname("/opt/homebrew/opt/mcp-reconnect/bin")
  def var = Pathname("/opt/homebrew/var")

  def shell_output(cmd)
    out = `#{cmd}`
    raise "#{cmd} exited #{$?.exitstatus}" unless $?.success?
    out
  end

  def assert_match(want, got)
    raise "test: #{got.inspect} does not match #{want.inspect}" unless got.match?(want)
    @log << ["assert_match", want]
  end

  # The service block's own DSL.
  class Service
    attr_reader :spec
    def initialize(formula) = (@f, @spec = formula, {})
    def run(args) = @spec["run"] = Array(args).map(&:to_s)
    def keep_alive(v) = @spec["keep_alive"] = v
    def environment_variables(h) = @spec["environment_variables"] = h.transform_keys(&:to_s).transform_values(&:to_s)
    def log_path(p) = @spec["log_path"] = p.to_s
    def error_log_path(p) = @spec["error_log_path"] = p.to_s
    def method_missing(name, *args) = @f.send(name, *args)
    def respond_to_missing?(*) = true
  end

  def self.report
    f = INFO[:class].new
    f.install
    svc = Service.new(f)
    svc.instance_eval(&INFO[:service])
    out = { "class" => INFO[:class].name, "desc" => INFO["desc"], "homepage" => INFO["homepage"], "version" => INFO["version"], "license" => INFO["license"],
            "urls" => INFO["urls"], "sha256s" => INFO["sha256s"], "install" => f.log.dup, "service" => svc.spec }
    if RUN_TEST
      f.log.clear
      f.instance_variable_set(:@phase, :test)
      f.instance_eval(&INFO[:test])
      out["test"] = f.log
    end
    puts JSON.generate(out)
  end
end

load ARGV[0]
Formula.report
