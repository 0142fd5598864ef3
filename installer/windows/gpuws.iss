; Inno Setup script for the Windows installer of gpuws (https://jrsoftware.org/isinfo.php).
; Build on Windows, from the repository root, after freezing the app:
;   py -m pip install -e .[freeze] pillow
;   py -m PyInstaller packaging\gpuws.spec --noconfirm --distpath build\frozen --workpath build\pyinstaller
;   iscc /DAppVersion=<gpuws.__version__> installer\windows\gpuws.iss
; installer\windows\build.ps1 does all three, reading the version from gpuws\__init__.py.
; Output: dist\gpuws-<version>-windows-x64-setup.exe

#ifndef AppVersion
  #error Pass the version: iscc /DAppVersion=X.Y.Z (installer\windows\build.ps1 does)
#endif
#define RepoRoot AddBackslash(SourcePath) + "..\.."

[Setup]
; A fixed AppId: upgrades and uninstalls find earlier installs by it. Never change it.
AppId={{6D0F3C52-3E4B-4E7B-9A0E-2B3C6F1A9D41}
AppName=gpuws
AppVersion={#AppVersion}
AppVerName=gpuws {#AppVersion}
AppPublisher=gpuws developers
AppPublisherURL=https://github.com/gpuws/gpuws
AppSupportURL=https://github.com/gpuws/gpuws/issues
AppUpdatesURL=https://github.com/gpuws/gpuws/releases
DefaultDirName={autopf}\gpuws
DefaultGroupName=gpuws
DisableProgramGroupPage=yes
; Per-user install by default (no admin prompt); an administrator may choose all users.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#RepoRoot}\dist
OutputBaseFilename=gpuws-{#AppVersion}-windows-x64-setup
SetupIconFile={#RepoRoot}\build\gpuws.ico
UninstallDisplayIcon={app}\gpuws.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ChangesEnvironment=yes

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add gpuws to PATH (use it from a terminal)"; Flags: unchecked

[Files]
; The whole one-folder PyInstaller build: gpuws.exe and _internal\.
Source: "{#RepoRoot}\build\frozen\gpuws\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\gpuws"; Filename: "{app}\gpuws.exe"
Name: "{autodesktop}\gpuws"; Filename: "{app}\gpuws.exe"; Tasks: desktopicon

[Registry]
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; \
  Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\gpuws.exe"; Description: "{cm:LaunchProgram,gpuws}"; Flags: nowait postinstall skipifsilent unchecked

[UninstallDelete]
; Only what the app itself may have written inside its own folder; the user's profiles and
; keyring secrets (in %APPDATA% and Windows Credential Manager) are theirs and stay.
Type: filesandordirs; Name: "{app}\_internal\gpuws\sim\fake_nvml\__pycache__"

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Path: string;
begin
  if not RegQueryStringValue(HKCU, 'Environment', 'Path', Path) then
    Path := '';
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Path) + ';') = 0;
end;
